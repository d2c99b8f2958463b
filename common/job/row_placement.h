// Where an embedding row lives: the parameter server that holds the row of
// id `id` out of `num_servers`, from a fixed hash of the id alone. Clients
// route pulls and pushes with it, and a server restoring a checkpoint onto
// another number of servers keeps exactly the rows it now owns, so the same
// id finds its row under any layout.
#ifndef PSFLOW_COMMON_JOB_ROW_PLACEMENT_H_
#define PSFLOW_COMMON_JOB_ROW_PLACEMENT_H_

#include <cstdint>

#include "common/splitmix64.h"

namespace psflow {

// The id's 64-bit hash, shared by placement and the servers' own striping.
inline uint64_t RowHash(int64_t id) {
  return SplitMix64Mix(static_cast<uint64_t>(id) ^ 0x6a09e667f3bcc908ull);
}

// The server (0 .. num_servers - 1) holding `id`'s row: the hash's high 32
// bits scaled to the range (uniform, no modulo bias worth naming).
inline int RowServer(int64_t id, int num_servers) {
  return static_cast<int>(
      ((RowHash(id) >> 32) * static_cast<uint64_t>(num_servers)) >> 32);
}

}  // namespace psflow

#endif  // PSFLOW_COMMON_JOB_ROW_PLACEMENT_H_
