#include "bench/run_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psflow::bench {

absl::StatusOr<std::string> MakeRunDir(absl::string_view prefix) {
  const std::string pattern = absl::StrCat("/tmp/", prefix, ".XXXXXX");
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(absl::StrCat(
        "cannot create a run folder ", pattern, ": ", std::strerror(errno),
        " (is /tmp writable and not full?)"));
  }
  return std::string(path.data());
}

int FinishRunDir(const std::string& dir, int exit_code) {
  if (exit_code != 0) {
    std::fprintf(stderr, "the run's logs are kept in %s\n", dir.c_str());
    return exit_code;
  }
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  if (error) {
    std::fprintf(stderr, "could not remove the run folder %s: %s\n",
                 dir.c_str(), error.message().c_str());
  }
  return exit_code;
}

}  // namespace psflow::bench
