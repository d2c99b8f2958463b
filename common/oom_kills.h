// How many processes the kernel's out-of-memory killer has killed on this
// host since boot (/proc/vmstat oom_kill, Linux 4.13+): a task that died
// of SIGKILL while the count rose was, most likely, killed for memory.
#ifndef PSFLOW_COMMON_OOM_KILLS_H_
#define PSFLOW_COMMON_OOM_KILLS_H_

#include <cstdint>
#include <string>

namespace psflow {

// The count; -1 when the kernel does not say.
int64_t OomKillsSoFar();

// What to add to "<task> was killed" when the count rose past `before`:
// "; the kernel's out-of-memory killer killed it (this host ran out of
// memory) ..." with the fix; "" when it did not (or cannot be known).
std::string OomKillNote(int64_t before);

// The same for counts already read (`now` from OomKillsSoFar()).
std::string OomKillNote(int64_t before, int64_t now);

}  // namespace psflow

#endif  // PSFLOW_COMMON_OOM_KILLS_H_
