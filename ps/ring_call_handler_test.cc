// RingCallHandler's own checks, without a ring: a call on one client's
// ring may name only that client's shared-memory session.
#include "ps/ring_call_handler.h"

#include <cstring>
#include <memory>
#include <string>

#include "client/shared_memory_shard.h"
#include "common/shared_memory_region.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kData = 1 << 16;

class RingCallHandlerTest : public ::testing::Test {
 protected:
  RingCallHandlerTest()
      : core_(ParameterServerCore::Options{}),
        service_(&core_, nullptr),
        sessions_(SharedMemorySessions::Options{}) {
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(ASYNC);
    config.set_num_workers(1);
    EXPECT_OK(core_.Configure(config));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(4);
    EXPECT_OK(core_.CreateVariables(create));
  }

  // A client's region, attached: its session id.
  uint64_t Attach(std::unique_ptr<SharedMemoryRegion>& region) {
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> created =
        SharedMemoryRegion::Create(kData);
    EXPECT_OK(created);
    region = *std::move(created);
    absl::StatusOr<uint64_t> session =
        sessions_.Attach(AttachRequestFor(*region), "worker-0");
    EXPECT_OK(session);
    return session.ok() ? *session : 0;
  }

  // Serves a pull of w into `session`'s region on the ring of `ring`.
  absl::Status PullOnRingOf(uint64_t ring, uint64_t session) {
    RingCallHandler handler(
        &service_, &sessions_, ring, "worker-0",
        [](const RoleSet&, absl::string_view) { return absl::OkStatus(); });
    PullBatchRequest pull;
    pull.set_protocol_version(kProtocolVersion);
    PullRequest* part = pull.add_parts();
    part->set_variable("w");
    part->set_num_elements(4);
    pull.mutable_shared()->set_session(session);
    pull.mutable_shared()->set_offset(kSharedMemoryHeaderBytes);
    pull.mutable_shared()->set_bytes(4 * sizeof(float));
    absl::Status answered = absl::UnknownError("not answered");
    handler.Serve(kRingPullBatch, pull.SerializeAsString(),
                  absl::InfiniteFuture(),
                  [&answered](const absl::Status& status, std::string) {
                    answered = status;
                  });
    return answered;
  }

  ParameterServerCore core_;
  PsService service_;
  SharedMemorySessions sessions_;
};

TEST_F(RingCallHandlerTest, ARingsCallsReachOnlyItsOwnSession) {
  std::unique_ptr<SharedMemoryRegion> mine, theirs;
  const uint64_t my_session = Attach(mine);
  const uint64_t their_session = Attach(theirs);
  char* their_values = theirs->base() + kSharedMemoryHeaderBytes;
  std::memset(their_values, 0x5a, 4 * sizeof(float));

  EXPECT_THAT(PullOnRingOf(my_session, their_session),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("another shared-memory session")));
  for (int i = 0; i < 4 * static_cast<int>(sizeof(float)); ++i) {
    ASSERT_EQ(their_values[i], 0x5a) << "byte " << i << " was written";
  }
  EXPECT_OK(PullOnRingOf(my_session, my_session));
}

}  // namespace
}  // namespace psflow
