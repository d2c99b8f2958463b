// Test helpers: one range of one variable pulled or pushed through a
// PsShard as a batch of one part, waiting for the answer, with the part's
// outcome as the call's (the way the protocol 1 single calls answered).
#ifndef PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_
#define PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/ps_shard.h"
#include "proto/protocol.h"
#include "proto/ps.pb.h"

namespace psflow::testing {

// Pulls out.size() values of `variable` from `offset`.
absl::StatusOr<PullResponse> PullOne(PsShard& shard,
                                     const std::string& variable,
                                     int64_t offset, absl::Span<float> out,
                                     int64_t min_version, absl::Time deadline);

// Pushes `gradient` to `variable` from `offset`, declaring `num_elements`
// (-1: the gradient's size) so tests can send a mismatched payload.
struct PushOptions {
  int64_t version = 0;
  int worker = 0;
  uint32_t protocol = kProtocolVersion;
  int64_t num_elements = -1;
};
absl::StatusOr<PushResponse> PushOne(
    PsShard& shard, const std::string& variable, int64_t offset,
    std::shared_ptr<const std::vector<float>> gradient, absl::Time deadline,
    const PushOptions& options = {});

}  // namespace psflow::testing

#endif  // PSFLOW_CLIENT_PS_SHARD_TEST_UTIL_H_
