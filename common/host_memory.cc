#include "common/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// A cgroup limit file's number; 0 when absent, "max" or unreadable.
int64_t CgroupLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!std::getline(in, text)) return 0;
  int64_t limit = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &limit)) return 0;
  return limit > 0 ? limit : 0;
}

}  // namespace

HostMemory AvailableMemory() {
  HostMemory memory;
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page = sysconf(_SC_PAGESIZE);
  memory.bytes = pages > 0 && page > 0 ? pages * page : 0;
  memory.source = "this host's memory";
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = CgroupLimit(path);
    // cgroup v1 writes "no limit" as a huge number: only a lower one counts.
    if (limit > 0 && (memory.bytes == 0 || limit < memory.bytes)) {
      memory.bytes = limit;
      memory.source = absl::StrCat("the container's limit (", path, ")");
    }
  }
  return memory;
}

}  // namespace psflow
