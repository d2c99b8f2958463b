// CancelInFlight reaches blocking control calls too: a task that learned
// the job ended must not wait out a Configure's deadline for a server that
// is gone (a diverging job stopped its servers while a worker still loaded
// its data, and the worker waited a minute).
#include <atomic>
#include <memory>
#include <thread>

#include "client/grpc_ps_shard.h"
#include "common/free_port.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

// A shard for a port nobody listens on: its calls wait for a server.
absl::StatusOr<std::unique_ptr<GrpcPsShard>> ShardWithNoServer() {
  ASSIGN_OR_RETURN(int port, PickFreePort());
  return std::make_unique<GrpcPsShard>(absl::StrCat("127.0.0.1:", port), "ps-0",
                                       GrpcPsShard::Options());
}

TEST(GrpcPsShardCancelTest, CancelInFlightEndsAControlCallWaitingForAServer) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcPsShard> shard, ShardWithNoServer());
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  std::atomic<bool> returned{false};
  absl::Status result;
  std::thread configure([&] {
    // Waits for the server to come up, until the (long) deadline.
    result =
        shard->Configure(request, absl::Now() + absl::Minutes(10)).status();
    returned = true;
  });
  // The call may not have started yet: cancel until it returns (progress,
  // not a clock; the test's own timeout bounds a broken cancel).
  while (!returned) {
    shard->CancelInFlight();
    absl::SleepFor(absl::Milliseconds(10));
  }
  configure.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled));
}

// After Close (the job ended), a call started later ends at once instead
// of waiting for a server that is gone: a worker's next pull after the
// job-end cancellation once waited out its whole deadline.
TEST(GrpcPsShardCancelTest, CallsStartedAfterCloseEndAtOnce) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcPsShard> shard, ShardWithNoServer());
  shard->Close();
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  EXPECT_THAT(shard->Configure(request, absl::Now() + absl::Minutes(10)),
              StatusIs(absl::StatusCode::kCancelled));
}

// The same for a bulk call. Its completion reaches the poll thread only
// through gRPC's (uninstrumented) completion queue, so this case runs in
// its own no_tsan target (client/BUILD; docs/testing.md).
TEST(GrpcPsShardCancelTest, BulkCallsStartedAfterCloseEndAtOnce) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<GrpcPsShard> shard, ShardWithNoServer());
  shard->Close();
  PullBatchRequest pull;
  pull.set_protocol_version(kProtocolVersion);
  PullRequest* part = pull.add_parts();
  part->set_variable("w");
  part->set_num_elements(1);
  float value = 0;
  Notification done;
  absl::Status pulled;
  shard->PullBatch(pull, {absl::MakeSpan(&value, 1)},
                   absl::Now() + absl::Minutes(10),
                   [&](absl::StatusOr<PullBatchResponse> response) {
                     pulled = response.status();
                     done.Notify();
                   });
  done.WaitForNotification();
  EXPECT_THAT(pulled, StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace psflow
