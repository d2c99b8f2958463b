#include "tests/test_paths.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace psflow::testing {
namespace {

std::atomic<int> next_id{0};

}  // namespace

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name, "-", getpid(), "-",
                      next_id.fetch_add(1));
}

std::string RunfilePath(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "psflow", "/",
                      workspace_relative);
}

}  // namespace psflow::testing
