#include "common/oom_kills.h"

#include <fstream>
#include <string>

namespace psflow {

int64_t OomKillsSoFar() {
  std::ifstream vmstat("/proc/vmstat");
  std::string name;
  int64_t value = 0;
  while (vmstat >> name >> value) {
    if (name == "oom_kill") return value;
  }
  return -1;
}

std::string OomKillNote(int64_t before) {
  return OomKillNote(before, OomKillsSoFar());
}

std::string OomKillNote(int64_t before, int64_t now) {
  if (before < 0 || now <= before) return "";
  return "; the kernel's out-of-memory killer killed a process on this host "
         "meanwhile (/proc/vmstat oom_kill), so it most likely ran out of "
         "memory: lower training.batch_size, make the model smaller, or give "
         "each worker more memory (the job's estimate is in the chief's log "
         "and psctl local's first lines)";
}

}  // namespace psflow
