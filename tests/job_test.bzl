"""job_test: a test that starts a real psflow job on 127.0.0.1.

Every whole-job test needs the role binaries and psctl at run time and the
same launch helpers (tests/local_run.h, tests/manual_cluster.h); this macro
says so once, so a test's rule names only what is its own.
"""

# What a job runs: the four role binaries, and psctl (psctl local, status,
# ckpt, data).
JOB_BINARIES = [
    "//chief",
    "//client/psctl:psctl",
    "//evaluator",
    "//ps:ps_server",
    "//worker",
]

# What every whole-job test links.
_JOB_TEST_DEPS = [
    ":local_run",
    ":test_paths",
    "//common:status_matchers",
    "//common:subprocess",
    "//third_party:absl",
    "//third_party:gtest_main",
]

def job_test(name, srcs = None, size = "large", data = [], deps = [], tags = [], **kwargs):
    """A cc_test over a real job.

    Args:
      name: the test's name; its source is <name>.cc unless srcs says.
      srcs: the test's sources.
      size: Bazel's test size (large: a whole job within 15 minutes).
      data: files it reads besides the job's binaries.
      deps: libraries it links besides the launch helpers.
      tags: tags besides "integration" (e.g. "soak", "sanitizer_job").
      **kwargs: anything else cc_test takes (env, shard_count, ...).
    """
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs or [name + ".cc"],
        data = JOB_BINARIES + data,
        tags = ["integration"] + tags,
        deps = _JOB_TEST_DEPS + [d for d in deps if d not in _JOB_TEST_DEPS],
        **kwargs
    )
