// Runs a libFuzzer harness (LLVMFuzzerTestOneInput) once over each file
// named on the command line: how the harnesses run in every ordinary build
// (gcc, `bazel test`), so each seed and each crash input kept in the corpus
// is a regression test. Built with --config=fuzz, the harnesses link
// libFuzzer instead and explore (tools/fuzz.sh).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <input file>...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
  }
  std::printf("replayed %d inputs\n", argc - 1);
  return 0;
}
