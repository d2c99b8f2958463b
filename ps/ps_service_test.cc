#include "ps/ps_service.h"

#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

// "w": 8 elements in chunks of 4, SGD at rate 1, sync with one worker.
class PsServiceTest : public ::testing::Test {
 protected:
  PsServiceTest()
      : core_(ParameterServerCore::Options{4 * sizeof(float)}),
        pool_(BufferPool::Create(1 << 20)),
        service_(&core_, pool_.get()) {
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(SYNC);
    config.set_num_workers(1);
    config.set_replicas_to_aggregate(1);
    EXPECT_OK(core_.Configure(config));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(8);
    EXPECT_OK(core_.CreateVariables(create));
  }

  static PullBatchRequest PullBoth(int64_t min_version) {
    PullBatchRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_min_version(min_version);
    for (int64_t offset : {0, 4}) {
      PullRequest* part = request.add_parts();
      part->set_variable("w");
      part->set_offset_elements(offset);
      part->set_num_elements(4);
    }
    return request;
  }

  // Pushes a gradient of ones to both chunks at `version`.
  absl::StatusOr<PushBatchResponse> PushOnes(int64_t version) {
    PushBatchRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_version(version);
    for (int64_t offset : {0, 4}) {
      PushRequest* part = request.add_parts();
      part->set_variable("w");
      part->set_offset_elements(offset);
      part->set_num_elements(4);
    }
    ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, service_.ResolvePush(request));
    std::vector<float> ones(4, 1.0f);
    const absl::Span<const float> gradients[] = {ones, ones};
    return service_.Push(request, refs, gradients);
  }

  ParameterServerCore core_;
  std::shared_ptr<BufferPool> pool_;
  PsService service_;
};

TEST_F(PsServiceTest, APullThatNeedNotWaitAnswersBeforeReturning) {
  std::vector<float> a(4, 9), b(4, 9);
  int answers = 0;
  auto pending =
      service_.Pull(PullBoth(0), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      ASSERT_OK(answer);
                      EXPECT_EQ(answer->response.versions_size(), 2);
                      ++answers;
                    });
  EXPECT_EQ(pending, nullptr);
  EXPECT_EQ(answers, 1);
  EXPECT_THAT(a, Each(0.0f));
  EXPECT_THAT(b, Each(0.0f));
}

TEST_F(PsServiceTest, AWaitingPullIsAnsweredByThePushThatCompletesTheStep) {
  std::vector<float> a(4), b(4);
  Notification answered;
  std::thread::id answered_on;
  auto pending =
      service_.Pull(PullBoth(1), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      EXPECT_OK(answer);
                      answered_on = std::this_thread::get_id();
                      answered.Notify();
                    });
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(answered.HasBeenNotified());
  ASSERT_OK(PushOnes(0));
  ASSERT_TRUE(answered.HasBeenNotified());
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  EXPECT_THAT(a, Each(-1.0f));  // w -= 1 * 1
  EXPECT_THAT(b, Each(-1.0f));
  pending->Cancel();  // after the answer: nothing happens
}

TEST_F(PsServiceTest, CancellingAWaitingPullAnswersDeadlineExceededOnce) {
  std::vector<float> a(4), b(4);
  int answers = 0;
  absl::Status result;
  auto pending =
      service_.Pull(PullBoth(5), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      result = answer.status();
                      ++answers;
                    });
  ASSERT_NE(pending, nullptr);
  pending->Cancel();
  pending->Cancel();
  EXPECT_EQ(answers, 1);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kDeadlineExceeded,
                               HasSubstr("waiting for step 5 of \"w\"")));
  ASSERT_OK(PushOnes(0));  // the cancelled waits are gone
  EXPECT_EQ(answers, 1);
}

TEST_F(PsServiceTest, ValuesToSendAreViewsOrASnapshot) {
  for (bool snapshot : {false, true}) {
    PullBatchRequest request = PullBoth(0);
    request.set_consistent_snapshot(snapshot);
    absl::StatusOr<PsService::PullAnswer> result;
    service_.Pull(request, {}, [&](absl::StatusOr<PsService::PullAnswer> a) {
      result = std::move(a);
    });
    ASSERT_OK(result);
    ASSERT_EQ(result->values.size(), 2u);
    EXPECT_EQ(result->values[0].size(), 4u);
    EXPECT_EQ(result->owner != nullptr, snapshot);
  }
}

TEST_F(PsServiceTest, BadRequestsAnswerAtOnceWithTheReason) {
  std::vector<float> small(3), b(4);
  absl::Status result;
  auto pending = service_.Pull(
      PullBoth(0), {absl::MakeSpan(small), absl::MakeSpan(b)},
      [&](absl::StatusOr<PsService::PullAnswer> a) { result = a.status(); });
  EXPECT_EQ(pending, nullptr);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("holds 3 values; the part has 4")));
  PullBatchRequest empty;
  empty.set_protocol_version(kProtocolVersion);
  service_.Pull(empty, {}, [&](absl::StatusOr<PsService::PullAnswer> a) {
    result = a.status();
  });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
