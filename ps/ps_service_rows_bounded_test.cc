// BOUNDED mode's bound on rows pulls: a worker's rows pull for its step
// waits for the slowest live worker exactly as its dense pull does (a
// worker that prefetches its next batch's rows asks for its next step).
#include <vector>

#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/ps_service.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

// Two workers, max_staleness 1; a dense variable "w" (4 floats) whose
// pushes move the workers' clocks, and a table "emb" of dimension 2.
class BoundedRowsTest : public ::testing::Test {
 protected:
  BoundedRowsTest()
      : core_(ParameterServerCore::Options{4 * sizeof(float)}),
        service_(&core_, nullptr) {
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(BOUNDED);
    config.set_num_workers(2);
    config.set_max_staleness(1);
    EXPECT_OK(core_.Configure(config));
    CreateVariablesRequest create;
    create.set_protocol_version(kProtocolVersion);
    VariableSpec* spec = create.add_variables();
    spec->set_name("w");
    spec->add_shape(4);
    EmbeddingTableSpec* table = create.add_tables();
    table->set_name("emb");
    table->set_dim(2);
    table->mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
    EXPECT_OK(core_.CreateVariables(create));
  }

  // `worker`'s dense gradient for its step `clock`: ends that step here.
  absl::Status EndStep(int worker, int64_t clock) {
    PushBatchRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_worker_index(worker);
    request.set_worker_clock(clock);
    request.set_batches_in_step(1);
    PushRequest* part = request.add_parts();
    part->set_variable("w");
    part->set_num_elements(4);
    ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, service_.ResolvePush(request));
    const std::vector<float> zeros(4, 0.0f);
    return service_.Push(request, refs, {zeros}).status();
  }

  // `worker`'s rows gradient of one for id 7.
  absl::Status PushRowOfOnes(int worker) {
    PushRowsRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_worker_index(worker);
    RowsPart* part = request.add_parts();
    part->set_table("emb");
    part->set_num_ids(1);
    ASSIGN_OR_RETURN(std::vector<EmbeddingTable*> tables,
                     service_.ResolvePushRows(request));
    const std::vector<float> ones(2, 1.0f);
    return service_.PushRows(request, tables, {ids_}, {ones}).status();
  }

  static PullRowsRequest RowsForStep(int worker, int64_t clock,
                                     bool join = false) {
    PullRowsRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_train(true);
    RowsPart* part = request.add_parts();
    part->set_table("emb");
    part->set_num_ids(1);
    request.mutable_worker_clock()->set_worker_index(worker);
    request.mutable_worker_clock()->set_clock(clock);
    request.mutable_worker_clock()->set_join(join);
    return request;
  }

  ParameterServerCore core_;
  PsService service_;
  const std::vector<int64_t> ids_ = {7};
};

TEST_F(BoundedRowsTest, ARowsPullAheadOfTheBoundWaitsAndSeesTheSlowestsStep) {
  // Worker 0 ended steps 0 and 1; worker 1 none yet.
  ASSERT_OK(EndStep(0, 0));
  ASSERT_OK(EndStep(0, 1));
  std::vector<float> row(2, -99.0f);
  Notification answered;
  // Step 2 needs every worker at step 1 or later.
  auto pending =
      service_.PullRows(RowsForStep(0, 2), {ids_}, {absl::MakeSpan(row)},
                        [&](absl::StatusOr<PsService::RowsAnswer> answer) {
                          ASSERT_OK(answer);
                          answered.Notify();
                        });
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(answered.HasBeenNotified());
  // Worker 1's step 0: its rows, then its dense push, which releases the
  // pull on the pushing thread with worker 1's rows in it.
  ASSERT_OK(PushRowOfOnes(1));
  EXPECT_FALSE(answered.HasBeenNotified());
  ASSERT_OK(EndStep(1, 0));
  ASSERT_TRUE(answered.HasBeenNotified());
  EXPECT_THAT(row, ::testing::Each(-1.0f));
  EXPECT_EQ(core_.Stats().bounded_waits(), 1);
}

TEST_F(BoundedRowsTest, ARowsPullWithinTheBoundAnswersAtOnce) {
  ASSERT_OK(EndStep(0, 0));
  std::vector<float> row(2, -99.0f);
  bool answered = false;
  auto pending =
      service_.PullRows(RowsForStep(0, 1), {ids_}, {absl::MakeSpan(row)},
                        [&](absl::StatusOr<PsService::RowsAnswer> answer) {
                          ASSERT_OK(answer);
                          answered = true;
                        });
  EXPECT_EQ(pending, nullptr);
  EXPECT_TRUE(answered);
  EXPECT_THAT(row, ::testing::Each(0.0f));
  EXPECT_EQ(core_.Stats().bounded_waits(), 0);
}

TEST_F(BoundedRowsTest, ACancelledRowsWaitNamesTheSlowWorker) {
  ASSERT_OK(EndStep(0, 0));
  ASSERT_OK(EndStep(0, 1));
  std::vector<float> row(2);
  absl::Status result;
  auto pending =
      service_.PullRows(RowsForStep(0, 2), {ids_}, {absl::MakeSpan(row)},
                        [&](absl::StatusOr<PsService::RowsAnswer> answer) {
                          result = answer.status();
                        });
  ASSERT_NE(pending, nullptr);
  pending->Cancel();
  EXPECT_THAT(result,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker 1 is at step 0; this pull by worker "
                                 "0 is for its step 2 with max_staleness 1")));
  ASSERT_OK(EndStep(1, 0));  // The cancelled wait is gone.
}

TEST_F(BoundedRowsTest, ARowsPullNeverJoinsAndBadClocksAreRefused) {
  std::vector<float> row(2);
  for (const PullRowsRequest& request :
       {RowsForStep(0, 0, /*join=*/true), RowsForStep(5, 0),
        RowsForStep(0, -1)}) {
    absl::Status result;
    auto pending =
        service_.PullRows(request, {ids_}, {absl::MakeSpan(row)},
                          [&](absl::StatusOr<PsService::RowsAnswer> answer) {
                            result = answer.status();
                          });
    EXPECT_EQ(pending, nullptr);
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument))
        << request.ShortDebugString();
  }
}

}  // namespace
}  // namespace psflow
