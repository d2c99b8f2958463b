"""psflow_fuzzer: a libFuzzer harness and its corpus regression test."""

def psflow_fuzzer(name, srcs, deps):
    """<name>_fuzzer (a binary) and <name>_fuzzer_test (a test).

    With --config=fuzz (clang, define fuzz=libfuzzer) the binary links
    libFuzzer and explores; otherwise it replays the files it is given, and
    the test replays every file under corpus/<name>/.

    Args:
      name: the parser's short name; its seeds live in corpus/<name>/.
      srcs: the harness (defines LLVMFuzzerTestOneInput).
      deps: what it parses with.
    """
    native.cc_binary(
        name = name + "_fuzzer",
        srcs = srcs,
        deps = deps + select({
            ":libfuzzer": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.filegroup(
        name = name + "_corpus",
        srcs = native.glob(["corpus/%s/*" % name]),
    )
    native.sh_test(
        name = name + "_fuzzer_test",
        size = "small",
        srcs = ["replay_test.sh"],
        args = [
            "$(location :%s_fuzzer)" % name,
            "$(locations :%s_corpus)" % name,
        ],
        data = [":%s_fuzzer" % name, ":%s_corpus" % name],
    )
