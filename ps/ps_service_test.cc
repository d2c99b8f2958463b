#include "ps/ps_service.h"

#include <limits>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

// SGD at rate 1 in `mode`.
ConfigureRequest Sgd(UpdateMode mode, int workers) {
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  config.mutable_learning_rate()->set_learning_rate(1.0);
  config.set_mode(mode);
  config.set_num_workers(workers);
  if (mode == SYNC) config.set_replicas_to_aggregate(workers);
  return config;
}

// "w": 8 elements in chunks of 4, SGD at rate 1, sync with one worker.
class PsServiceTest : public ::testing::Test {
 protected:
  explicit PsServiceTest(const ConfigureRequest& config = Sgd(SYNC, 1))
      : core_(ParameterServerCore::Options{4 * sizeof(float)}),
        pool_(BufferPool::Create(1 << 20)),
        service_(&core_, pool_.get()) {
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

  // Pushes a gradient of ones to both chunks at `version`; with a clock
  // (bounded mode), as `worker`'s step `clock`.
  absl::StatusOr<PushBatchResponse> PushOnes(
      int64_t version, int worker = 0,
      std::optional<int64_t> clock = std::nullopt, float value = 1.0f) {
    PushBatchRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_version(version);
    request.set_worker_index(worker);
    if (clock.has_value()) {
      request.set_worker_clock(*clock);
      request.set_batches_in_step(1);
    }
    for (int64_t offset : {0, 4}) {
      PushRequest* part = request.add_parts();
      part->set_variable("w");
      part->set_offset_elements(offset);
      part->set_num_elements(4);
    }
    ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, service_.ResolvePush(request));
    std::vector<float> ones(4, value);
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

// Consistent-snapshot answers hold their buffers until sent: together at
// most twice the dense variables ("w": 32 bytes, so 64; the minimum budget
// is set lower here).
TEST_F(PsServiceTest, SnapshotPullsWaitingToBeSentStayWithinTheirBudget) {
  PsService service(&core_, pool_.get(), kMaxWaitingRowPullBytes,
                    /*min_snapshot_bytes=*/40);
  PullBatchRequest request = PullBoth(0);
  request.set_consistent_snapshot(true);
  std::vector<absl::StatusOr<PsService::PullAnswer>> answers;
  auto pull = [&] {
    service.Pull(request, {},
                 [&](absl::StatusOr<PsService::PullAnswer> answer) {
                   answers.push_back(std::move(answer));
                 });
  };
  pull();
  pull();
  pull();  // 96 bytes together: refused
  ASSERT_EQ(answers.size(), 3);
  ASSERT_OK(answers[0]);
  EXPECT_EQ(answers[0]->values.size(), 2);
  ASSERT_OK(answers[1]);
  EXPECT_THAT(answers[2].status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("holding 64 bytes"),
                             HasSubstr("still being sent"))));
  answers.clear();  // the answers sent: their buffers released
  pull();
  ASSERT_EQ(answers.size(), 1);
  EXPECT_OK(answers[0]);
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

// Sizes from the network are bounded before anything is sized by them.
TEST_F(PsServiceTest, OversizedBatchesAndForeignWorkersAreRefused) {
  // One 4 MiB chunk named 256 times would be 1 GiB of snapshot: refused
  // before any buffer is sized by it.
  ParameterServerCore big(ParameterServerCore::Options{4 << 20});
  ASSERT_OK(big.Configure(Sgd(ASYNC, 1)));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("big");
  spec->add_shape(1 << 20);
  ASSERT_OK(big.CreateVariables(create));
  PsService big_service(&big, pool_.get());
  PullBatchRequest greedy;
  greedy.set_protocol_version(kProtocolVersion);
  greedy.set_consistent_snapshot(true);
  for (int i = 0; i < kMaxBatchParts; ++i) {
    PullRequest* part = greedy.add_parts();
    part->set_variable("big");
    part->set_num_elements(1 << 20);
  }
  absl::Status answered;
  big_service.Pull(greedy, {}, [&](absl::StatusOr<PsService::PullAnswer> a) {
    answered = a.status();
  });
  EXPECT_THAT(answered, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("name each chunk at most once")));
  // A sync push from a worker index this job does not have.
  EXPECT_THAT(PushOnes(0, /*worker=*/7),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker_index 7 names no worker")));
  EXPECT_THAT(PushOnes(0, /*worker=*/-1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ConfigureRequest huge = Sgd(SYNC, kMaxWorkers + 1);
  ParameterServerCore other(ParameterServerCore::Options{16});
  EXPECT_THAT(other.Configure(huge),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_workers is 65537")));
}

// A batch names each chunk once: in SYNC mode a second part for the same
// chunk would be taken for the worker's duplicate and silently dropped.
TEST_F(PsServiceTest, ABatchNamingAChunkTwiceIsRefusedWholeAndAppliesNothing) {
  PushBatchRequest push;
  push.set_protocol_version(kProtocolVersion);
  push.set_version(0);
  push.set_worker_index(0);
  for (int repeat = 0; repeat < 2; ++repeat) {
    PushRequest* part = push.add_parts();
    part->set_variable("w");
    part->set_offset_elements(4);
    part->set_num_elements(4);
  }
  EXPECT_THAT(service_.ResolvePush(push),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"w\" at offset 4 twice")));
  PullBatchRequest pull = PullBoth(0);
  *pull.add_parts() = pull.parts(0);
  absl::Status answered;
  service_.Pull(pull, {}, [&](absl::StatusOr<PsService::PullAnswer> a) {
    answered = a.status();
  });
  EXPECT_THAT(answered, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("at most once")));
  // Nothing moved: step 0's gradients are still taken, once per chunk.
  ASSERT_OK_AND_ASSIGN(PushBatchResponse pushed, PushOnes(0));
  ASSERT_EQ(pushed.results_size(), 2);
  for (const PushPartResult& part : pushed.results()) {
    EXPECT_EQ(part.code(), 0) << part.message();
    EXPECT_EQ(part.version(), 1);
  }
}

// Rows pulls that wait for a step hold their ids: together, bounded.
TEST(PsServiceRowsTest, WaitingRowPullsHoldBoundedIds) {
  ParameterServerCore core(ParameterServerCore::Options{16});
  ASSERT_OK(core.Configure(Sgd(SYNC, 1)));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  EmbeddingTableSpec* table = create.add_tables();
  table->set_name("emb");
  table->set_dim(1);
  table->mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
  ASSERT_OK(core.CreateVariables(create));
  // Room for one waiting pull of 10 ids (80 bytes), not two.
  PsService service(&core, nullptr, /*max_waiting_row_bytes=*/100);
  const std::vector<int64_t> ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> out(ids.size());
  PullRowsRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_min_version(5);  // a step far ahead: the pull waits
  RowsPart* part = request.add_parts();
  part->set_table("emb");
  part->set_num_ids(ids.size());
  std::vector<absl::Status> answers;
  auto pull = [&] {
    return service.PullRows(
        request, {ids}, {absl::MakeSpan(out)},
        [&answers](absl::StatusOr<PsService::RowsAnswer> a) {
          answers.push_back(a.status());
        });
  };
  auto first = pull();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(pull(), nullptr);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_THAT(answers[0], StatusIs(absl::StatusCode::kResourceExhausted,
                                   HasSubstr("waiting for a step")));
  first->Cancel();  // answered: its ids are released
  ASSERT_EQ(answers.size(), 2u);
  auto third = pull();
  ASSERT_NE(third, nullptr);
  third->Cancel();
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

// A sync step with two workers applies the mean of their gradients, also
// when the gradients' sum would overflow a float (it was applied as 0).
class SyncPsServiceTest : public PsServiceTest {
 protected:
  SyncPsServiceTest() : PsServiceTest(Sgd(SYNC, 2)) {}
};

TEST_F(SyncPsServiceTest, HugeGradientsAreAveragedWithoutOverflow) {
  constexpr float kHuge = 3e38f;  // finite; twice it is not
  ASSERT_OK(PushOnes(0, /*worker=*/0, std::nullopt, kHuge));
  ASSERT_OK(PushOnes(0, /*worker=*/1, std::nullopt, kHuge));
  std::vector<float> a(4), b(4);
  service_.Pull(
      PullBoth(1), {absl::MakeSpan(a), absl::MakeSpan(b)},
      [](absl::StatusOr<PsService::PullAnswer> answer) { ASSERT_OK(answer); });
  EXPECT_THAT(a, Each(-kHuge));  // w -= 1 * mean
  EXPECT_THAT(b, Each(-kHuge));
}

// Bounded staleness with two workers, max_staleness 1.
class BoundedPsServiceTest : public PsServiceTest {
 protected:
  BoundedPsServiceTest() : PsServiceTest(Bounded()) {}

  static ConfigureRequest Bounded() {
    ConfigureRequest config = Sgd(BOUNDED, 2);
    config.set_max_staleness(1);
    return config;
  }

  static PullBatchRequest PullForStep(int worker, int64_t clock,
                                      bool join = false) {
    PullBatchRequest request = PullBoth(0);
    request.mutable_worker_clock()->set_worker_index(worker);
    request.mutable_worker_clock()->set_clock(clock);
    request.mutable_worker_clock()->set_join(join);
    return request;
  }
};

TEST_F(BoundedPsServiceTest, AWorkerAheadWaitsForTheSlowestAndSeesItsStep) {
  // Worker 0 pushed steps 0 and 1; worker 1 nothing yet.
  ASSERT_OK(PushOnes(0, 0, 0));
  ASSERT_OK(PushOnes(1, 0, 1));
  std::vector<float> a(4), b(4);
  Notification answered;
  int64_t clock = -1;
  // Step 2 needs every worker at step 1 or later.
  auto pending =
      service_.Pull(PullForStep(0, 2), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      ASSERT_OK(answer);
                      clock = answer->response.worker_clock();
                      answered.Notify();
                    });
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(answered.HasBeenNotified());
  // Worker 1's step 0 releases it, on the pushing thread, with that
  // step's update in the values.
  ASSERT_OK(PushOnes(0, 1, 0));
  ASSERT_TRUE(answered.HasBeenNotified());
  EXPECT_EQ(clock, 2);
  EXPECT_THAT(a, Each(-3.0f));
  EXPECT_EQ(core_.Stats().bounded_waits(), 1);
}

// A diverging worker's step still counts: its refused gradient must not
// hold back the pulls that wait for its clock (they waited out the RPC
// deadline while the worker waited on its own next pull).
TEST_F(BoundedPsServiceTest, ARefusedGradientStillEndsTheWorkersStep) {
  ASSERT_OK(PushOnes(0, 0, 0));
  ASSERT_OK(PushOnes(1, 0, 1));
  std::vector<float> a(4), b(4);
  Notification answered;
  auto pending =
      service_.Pull(PullForStep(0, 2), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      ASSERT_OK(answer);
                      answered.Notify();
                    });
  ASSERT_NE(pending, nullptr);
  EXPECT_THAT(PushOnes(0, 1, 0, std::numeric_limits<float>::quiet_NaN()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(answered.HasBeenNotified());
  // Only worker 0's two steps were applied.
  EXPECT_THAT(a, Each(-2.0f));
}

TEST_F(BoundedPsServiceTest, APullWithinTheBoundAnswersAtOnce) {
  std::vector<float> a(4), b(4);
  int answers = 0;
  auto pending =
      service_.Pull(PullForStep(1, 1), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      ASSERT_OK(answer);
                      ++answers;
                    });
  EXPECT_EQ(pending, nullptr);
  EXPECT_EQ(answers, 1);
  // Pulls without a worker clock (the chief, the evaluator) never wait.
  service_.Pull(PullBoth(0), {absl::MakeSpan(a), absl::MakeSpan(b)},
                [&](absl::StatusOr<PsService::PullAnswer> answer) {
                  ASSERT_OK(answer);
                  ++answers;
                });
  EXPECT_EQ(answers, 2);
}

TEST_F(BoundedPsServiceTest, CancelledWaitNamesTheSlowWorker) {
  ASSERT_OK(PushOnes(0, 0, 0));
  ASSERT_OK(PushOnes(1, 0, 1));
  std::vector<float> a(4), b(4);
  absl::Status result;
  auto pending =
      service_.Pull(PullForStep(0, 2), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      result = answer.status();
                    });
  ASSERT_NE(pending, nullptr);
  pending->Cancel();
  EXPECT_THAT(result,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker 1 is at step 0; this pull by worker "
                                 "0 is for its step 2 with max_staleness 1")));
  ASSERT_OK(PushOnes(0, 1, 0));  // The cancelled wait is gone.
}

TEST_F(BoundedPsServiceTest, ExcludingTheSlowWorkerReleasesTheWait) {
  ASSERT_OK(PushOnes(0, 0, 0));
  ASSERT_OK(PushOnes(1, 0, 1));
  std::vector<float> a(4), b(4);
  Notification answered;
  auto pending =
      service_.Pull(PullForStep(0, 2), {absl::MakeSpan(a), absl::MakeSpan(b)},
                    [&](absl::StatusOr<PsService::PullAnswer> answer) {
                      EXPECT_OK(answer);
                      answered.Notify();
                    });
  ASSERT_NE(pending, nullptr);
  ExcludeWorkersRequest lost;
  lost.set_protocol_version(kProtocolVersion);
  lost.add_workers(1);
  ASSERT_OK(core_.ExcludeWorkers(lost));
  EXPECT_TRUE(answered.HasBeenNotified());
}

TEST_F(BoundedPsServiceTest, AJoiningWorkerGoesOnFromTheSlowestOther) {
  for (int64_t step = 0; step < 5; ++step) ASSERT_OK(PushOnes(step, 0, step));
  // Worker 1 (re)starts with no steps of its own.
  std::vector<float> a(4), b(4);
  int64_t clock = -1;
  service_.Pull(PullForStep(1, 0, /*join=*/true),
                {absl::MakeSpan(a), absl::MakeSpan(b)},
                [&](absl::StatusOr<PsService::PullAnswer> answer) {
                  ASSERT_OK(answer);
                  clock = answer->response.worker_clock();
                });
  EXPECT_EQ(clock, 5);
}

TEST_F(BoundedPsServiceTest, BadWorkerClocksAreRefusedBeforeAnythingApplies) {
  std::vector<float> a(4), b(4);
  absl::Status result;
  service_.Pull(PullForStep(2, 0), {absl::MakeSpan(a), absl::MakeSpan(b)},
                [&](absl::StatusOr<PsService::PullAnswer> answer) {
                  result = answer.status();
                });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("names worker 2")));
  EXPECT_THAT(PushOnes(0, 0, -5), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("worker_clock -5")));
  EXPECT_THAT(PushOnes(0, 7, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(core_.Stats().updates_applied(), 0);
}

}  // namespace
}  // namespace psflow
