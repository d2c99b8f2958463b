#include "ps/embedding_table.h"

#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "common/job/row_placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/lr_schedule.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;
using Kind = OptimizerParams::Kind;

// A table with its optimizer and constant learning rate.
class TestTable {
 public:
  explicit TestTable(EmbeddingTableOptions options, Kind kind = Kind::kSgd,
                     double lr = 0.5, bool sync = false, int replicas = 1,
                     OptimizerParams params = OptimizerParams()) {
    params.kind = kind;
    optimizer_ = *Optimizer::Create(params);
    LrScheduleConfig schedule;
    schedule.learning_rate = lr;
    schedule_ = std::make_unique<LrSchedule>(*LrSchedule::Create(schedule));
    UpdateRule rule;
    rule.optimizer = optimizer_.get();
    rule.schedule = schedule_.get();
    rule.sync = sync;
    rule.replicas_to_aggregate = replicas;
    if (options.name.empty()) options.name = "emb";
    if (options.dim == 0) options.dim = 2;
    table_ = std::make_unique<EmbeddingTable>(options, optimizer_.get(), rule);
  }

  EmbeddingTable& operator*() { return *table_; }
  EmbeddingTable* operator->() { return table_.get(); }

  std::vector<float> Pull(std::vector<int64_t> ids, bool train = true) {
    std::vector<float> out(ids.size() * table_->dim());
    absl::StatusOr<int64_t> version =
        table_->Pull(ids, train, absl::MakeSpan(out));
    EXPECT_OK(version);
    return out;
  }

  absl::StatusOr<std::pair<PushOutcome, int64_t>> Push(
      std::vector<int64_t> ids, std::vector<float> gradients,
      int64_t version = 0, int worker = 0) {
    return table_->Push(ids, gradients, version, worker);
  }

 private:
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<EmbeddingTable> table_;
};

EmbeddingTableOptions Options(int dim = 2) {
  EmbeddingTableOptions options;
  options.name = "emb";
  options.dim = dim;
  options.initializer.seed = 11;
  return options;
}

std::vector<float> InitialRow(const EmbeddingTableOptions& options,
                              int64_t id) {
  std::vector<float> row(options.dim);
  options.initializer.Fill(id, absl::MakeSpan(row));
  return row;
}

TEST(EmbeddingTableTest, FirstPullCreatesTheInitializersRow) {
  TestTable table(Options());
  EXPECT_EQ(table->Stats().rows, 0);
  const std::vector<float> rows = table.Pull({5, 9});
  const std::vector<float> five = InitialRow(Options(), 5);
  const std::vector<float> nine = InitialRow(Options(), 9);
  EXPECT_EQ(rows, (std::vector<float>{five[0], five[1], nine[0], nine[1]}));
  EXPECT_EQ(table->Stats().rows, 2);
  EXPECT_EQ(table->Stats().admissions, 2);
  // An evaluation pull reads without creating: rows as they are, an id
  // without one as zeros (the exported model's default row).
  EXPECT_EQ(table.Pull({77}, /*train=*/false), (std::vector<float>{0, 0}));
  EXPECT_EQ(table.Pull({9, 77}, /*train=*/false),
            (std::vector<float>{nine[0], nine[1], 0, 0}));
  EXPECT_EQ(table->Stats().rows, 2);
}

// Rows split over two tables by RowServer (two servers) equal one table's
// rows: the initial value depends on the id alone.
TEST(EmbeddingTableTest, TheSameIdGetsTheSameRowOnAnyLayout) {
  TestTable whole(Options(8));
  TestTable part[2] = {TestTable(Options(8)), TestTable(Options(8))};
  for (int64_t id = -50; id < 50; ++id) {
    EXPECT_EQ(whole.Pull({id}), part[RowServer(id, 2)].Pull({id}));
  }
}

TEST(EmbeddingTableTest, SgdUpdatesOnlyThePushedRows) {
  TestTable table(Options(), Kind::kSgd, /*lr=*/0.5);
  const std::vector<float> before = table.Pull({1, 2});
  ASSERT_OK(table.Push({1}, {2.0f, -4.0f}));
  const std::vector<float> after = table.Pull({1, 2});
  EXPECT_FLOAT_EQ(after[0], before[0] - 1.0f);
  EXPECT_FLOAT_EQ(after[1], before[1] + 2.0f);
  EXPECT_EQ(after[2], before[2]);
  EXPECT_EQ(after[3], before[3]);
  EXPECT_EQ(table->Version(), 1);
}

TEST(EmbeddingTableTest, AnIdTwiceInOnePushIsUpdatedTwice) {
  TestTable table(Options(), Kind::kSgd, 0.5);
  const std::vector<float> before = table.Pull({3});
  ASSERT_OK(table.Push({3, 3}, {1.0f, 1.0f, 1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(table.Pull({3})[0], before[0] - 1.0f);
}

// Adagrad per row: a += g^2 (from 0.1); p -= lr g / (sqrt(a) + eps).
TEST(EmbeddingTableTest, AdagradKeepsAnAccumulatorPerRow) {
  EmbeddingTableOptions options = Options(1);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  OptimizerParams params;
  params.initial_accumulator_value = 0.0;
  params.epsilon = 1e-7;
  TestTable table(options, Kind::kAdagrad, 1.0, false, 1, params);
  ASSERT_OK(table.Push({1}, {3.0f}));  // a = 9:  p = -3 / 3
  ASSERT_OK(table.Push({1}, {4.0f}));  // a = 25: p -= 4 / 5
  ASSERT_OK(table.Push({2}, {0.5f}));  // another row, its own a = 0.25
  EXPECT_NEAR(table.Pull({1})[0], -1.0f - 0.8f, 1e-6);
  EXPECT_NEAR(table.Pull({2})[0], -1.0f, 1e-6);
  EXPECT_EQ(table->slot_names(), std::vector<std::string>{"accumulator"});
}

// Lazy Adam: a row first updated at the table's third step is corrected
// as its own first update, so it moves by lr (m_hat = g, v_hat = g^2).
TEST(EmbeddingTableTest, AdamCountsStepsPerRow) {
  EmbeddingTableOptions options = Options(1);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  TestTable table(options, Kind::kAdam, 0.1);
  ASSERT_OK(table.Push({1}, {1.0f}));
  ASSERT_OK(table.Push({1}, {1.0f}));
  ASSERT_OK(table.Push({2}, {5.0f}));
  EXPECT_EQ(table->Version(), 3);
  EXPECT_NEAR(table.Pull({2})[0], -0.1f, 1e-5);
  // Row 1 had two updates of the same gradient: each moved it by lr.
  EXPECT_NEAR(table.Pull({1})[0], -0.2f, 1e-5);
  int64_t updates_of_two = -1;
  for (int s = 0; s < EmbeddingTable::kStripes; ++s) {
    table->VisitStripe(s, [&](const SavedRow& row) {
      if (row.id == 2) updates_of_two = row.updates;
    });
  }
  EXPECT_EQ(updates_of_two, 1);
}

// FTRL's L1 keeps rows with small accumulated gradients at exactly zero.
TEST(EmbeddingTableTest, FtrlZeroesRowsBelowTheL1Strength) {
  EmbeddingTableOptions options = Options(1);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  OptimizerParams params;
  params.initial_accumulator_value = 9;
  params.l1 = 3;
  TestTable table(options, Kind::kFtrl, 1.0, false, 1, params);
  ASSERT_OK(table.Push({1, 2}, {1.0f, 4.0f}));
  // Row 1: z = 1 <= 3: zero. Row 2: n = 25, z = 4 - (5 - 3) * 0 = 4:
  // w = (3 - 4) / 5.
  EXPECT_EQ(table.Pull({1})[0], 0.0f);
  EXPECT_NEAR(table.Pull({2})[0], -0.2f, 1e-6);
}

TEST(EmbeddingTableTest, AdmissionWaitsForMinFrequencyPushes) {
  EmbeddingTableOptions options = Options();
  options.min_frequency = 3;
  TestTable table(options, Kind::kSgd, 0.5);
  // Below admission a lookup answers the initializer's row, creating none.
  EXPECT_EQ(table.Pull({4}), InitialRow(options, 4));
  ASSERT_OK(table.Push({4}, {1.0f, 1.0f}));
  ASSERT_OK(table.Push({4}, {1.0f, 1.0f}));
  EXPECT_EQ(table->Stats().rows, 0);
  EXPECT_EQ(table->Stats().unadmitted_gradients, 2);
  EXPECT_EQ(table->Stats().unadmitted_lookups, 1);
  EXPECT_EQ(table.Pull({4}), InitialRow(options, 4));
  // The third push admits the id and applies its gradient.
  ASSERT_OK(table.Push({4}, {2.0f, 2.0f}));
  EXPECT_EQ(table->Stats().rows, 1);
  EXPECT_EQ(table->Stats().admissions, 1);
  EXPECT_FLOAT_EQ(table.Pull({4})[0], InitialRow(options, 4)[0] - 1.0f);
}

TEST(EmbeddingTableTest, UnadmittedIdsCanReadAsZeros) {
  EmbeddingTableOptions options = Options();
  options.min_frequency = 2;
  options.unadmitted_zeros = true;
  TestTable table(options);
  EXPECT_EQ(table.Pull({4}), (std::vector<float>{0.0f, 0.0f}));
}

TEST(EmbeddingTableTest, RowsUnusedForEvictAfterStepsAreEvicted) {
  EmbeddingTableOptions options = Options();
  options.evict_after_steps = 8;
  TestTable table(options, Kind::kSgd, 0.5);
  ASSERT_OK(table.Push({100}, {1.0f, 1.0f}));  // used at step 0
  for (int step = 1; step <= 20; ++step) {
    ASSERT_OK(table.Push({200}, {0.0f, 0.0f}));
  }
  EXPECT_EQ(table->Stats().rows, 1);
  EXPECT_EQ(table->Stats().evicted_by_age, 1);
  // A returning id starts again from its initializer row.
  EXPECT_EQ(table.Pull({100}), InitialRow(options, 100));
}

TEST(EmbeddingTableTest, CapacityEvictsTheLeastRecentlyUsedRows) {
  EmbeddingTableOptions options = Options();
  options.max_rows = EmbeddingTable::kStripes * 8;
  TestTable table(options, Kind::kSgd, 0.5);
  for (int64_t id = 0; id < 5000; ++id) {
    ASSERT_OK(table.Push({id}, {0.0f, 0.0f}));
    // Id 7 is used at every step: it must survive.
    ASSERT_OK(table.Push({7}, {0.0f, 0.0f}));
  }
  const EmbeddingTableStats stats = table->Stats();
  EXPECT_LE(stats.rows, options.max_rows);
  EXPECT_GT(stats.evicted_by_capacity, 4000);
  bool seven = false, recent = false, old = false;
  for (int s = 0; s < EmbeddingTable::kStripes; ++s) {
    table->VisitStripe(s, [&](const SavedRow& row) {
      if (row.id == 7) seven = true;
      if (row.id == 4999) recent = true;
      if (row.id == 0) old = true;
    });
  }
  EXPECT_TRUE(seven);
  EXPECT_TRUE(recent);
  EXPECT_FALSE(old);
}

TEST(EmbeddingTableTest, MemoryBudgetRefusesRowsWithTheFix) {
  TestTable table(Options());
  std::atomic<int64_t> used{0};
  table->SetMemoryBudget(&used, 10 * table->bytes_per_row());
  for (int64_t id = 0; id < 10; ++id) table.Pull({id});
  std::vector<float> out(2);
  EXPECT_THAT(table->Pull({10}, true, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("'emb': creating a row would pass")));
  EXPECT_THAT(
      table->Pull({10}, true, absl::MakeSpan(out)),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_rows")));
  table->Clear();
  EXPECT_EQ(used.load(), 0);
}

TEST(EmbeddingTableTest, SyncAveragesTheTouchedRowsOfEveryReplica) {
  TestTable table(Options(1), Kind::kSgd, 1.0, /*sync=*/true, /*replicas=*/2);
  const float one = table.Pull({1})[0];
  const float two = table.Pull({2})[0];
  auto first = table.Push({1}, {2.0f}, /*version=*/0, /*worker=*/0);
  ASSERT_OK(first);
  EXPECT_EQ(first->first, PushOutcome::kAccumulated);
  // A second push of the same worker for the same step changes nothing.
  auto again = table.Push({1}, {100.0f}, 0, 0);
  ASSERT_OK(again);
  EXPECT_EQ(again->first, PushOutcome::kDuplicate);
  EXPECT_EQ(table.Pull({1})[0], one);
  auto second = table.Push({1, 2}, {4.0f, 2.0f}, 0, 1);
  ASSERT_OK(second);
  EXPECT_EQ(second->first, PushOutcome::kApplied);
  EXPECT_EQ(second->second, 1);
  // Mean over both replicas; row 2 was absent from worker 0's push.
  EXPECT_FLOAT_EQ(table.Pull({1})[0], one - 3.0f);
  EXPECT_FLOAT_EQ(table.Pull({2})[0], two - 1.0f);
  // A gradient computed at version 0 is now stale.
  EXPECT_THAT(table.Push({1}, {1.0f}, 0, 0),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("stale")));
  EXPECT_EQ(table->Stats().stale_pushes_dropped, 1);
  EXPECT_THAT(table.Push({1}, {1.0f}, 5, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ahead of the table")));
}

// The mean of finite gradients is applied even where their sum would
// overflow a float (it was applied as 0).
TEST(EmbeddingTableTest, SyncAveragesHugeGradientsWithoutOverflow) {
  TestTable table(Options(1), Kind::kSgd, 1.0, /*sync=*/true, /*replicas=*/2);
  const float before = table.Pull({1})[0];
  ASSERT_OK(table.Push({1}, {3e38f}, 0, 0));
  ASSERT_OK(table.Push({1}, {3e38f}, 0, 1));
  EXPECT_FLOAT_EQ(table.Pull({1})[0], before - 3e38f);
}

TEST(EmbeddingTableTest, SyncHoldKeepsTheAggregateUntilReleased) {
  TestTable table(Options(1), Kind::kSgd, 1.0, true, 1);
  const float before = table.Pull({1})[0];
  table->SetHoldLimit(0);
  bool reached = false;
  ASSERT_TRUE(table->WhenVersionReached(1, [&] { reached = true; }));
  ASSERT_OK(table.Push({1}, {1.0f}, 0, 0));
  EXPECT_EQ(table->Version(), 0);
  EXPECT_EQ(table.Pull({1})[0], before);
  EXPECT_FALSE(reached);
  table->SetHoldLimit(Variable::kNoHold);
  EXPECT_EQ(table->Version(), 1);
  EXPECT_TRUE(reached);
  EXPECT_FLOAT_EQ(table.Pull({1})[0], before - 1.0f);
}

TEST(EmbeddingTableTest, AsyncWaitersRunWhenTheVersionIsReached) {
  TestTable table(Options(1));
  int runs = 0;
  EXPECT_FALSE(table->WhenVersionReached(0, [&] { ++runs; }).has_value());
  auto id = table->WhenVersionReached(2, [&] { ++runs; });
  ASSERT_TRUE(id.has_value());
  ASSERT_OK(table.Push({1}, {1.0f}));
  EXPECT_EQ(runs, 0);
  ASSERT_OK(table.Push({1}, {1.0f}));
  EXPECT_EQ(runs, 1);
  auto cancelled = table->WhenVersionReached(5, [&] { ++runs; });
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_TRUE(table->CancelWait(*cancelled));
  EXPECT_FALSE(table->CancelWait(*cancelled));
}

// Rows saved with their slots, update counts and last use restore into a
// fresh table that then trains exactly like the original.
TEST(EmbeddingTableTest, SavedRowsRestoreWithSlotsAndCounts) {
  EmbeddingTableOptions options = Options(3);
  TestTable original(options, Kind::kAdam, 0.01);
  for (int step = 0; step < 5; ++step) {
    ASSERT_OK(original.Push({1, 2, step + 10},
                            std::vector<float>(9, 0.5f * (step + 1))));
  }
  TestTable restored(options, Kind::kAdam, 0.01);
  int64_t rows = 0;
  for (int s = 0; s < EmbeddingTable::kStripes; ++s) {
    original->VisitStripe(s, [&](const SavedRow& row) {
      ++rows;
      ASSERT_OK(restored->AddRestoredRow(row));
    });
  }
  restored->SetRestoredVersion(original->Version());
  EXPECT_EQ(rows, 7);
  EXPECT_EQ(restored->Stats().rows, 7);
  EXPECT_EQ(restored->Stats().admissions, 0);
  EXPECT_EQ(restored->Version(), 5);
  ASSERT_OK(original.Push({1, 12}, std::vector<float>(6, -1.0f)));
  ASSERT_OK(restored.Push({1, 12}, std::vector<float>(6, -1.0f)));
  EXPECT_EQ(original.Pull({1, 2, 12}), restored.Pull({1, 2, 12}));
  SavedRow bad;
  bad.id = 1;
  std::vector<float> short_row(2);
  bad.data = short_row;
  EXPECT_THAT(restored->AddRestoredRow(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("this table stores 9")));
}

TEST(EmbeddingTableTest, ConcurrentPullsAndPushesLoseNoUpdate) {
  EmbeddingTableOptions options = Options(4);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  TestTable table(options, Kind::kSgd, 1.0);
  constexpr int kThreads = 4;
  constexpr int kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> out(8);
      for (int i = 0; i < kPushes; ++i) {
        // Every thread pushes row 0; each also has rows of its own.
        const std::vector<int64_t> ids = {0, 1000 * (t + 1) + i % 50};
        ASSERT_OK(table->Push(ids, std::vector<float>(8, -1.0f), 0, t));
        ASSERT_OK(table->Pull(ids, true, absl::MakeSpan(out)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_FLOAT_EQ(table.Pull({0})[0], kThreads * kPushes);
  EXPECT_EQ(table->Version(), kThreads * kPushes);
  EXPECT_EQ(table->Stats().rows, 1 + kThreads * 50);
}

TEST(EmbeddingTableTest, BadOptionsNameTheTableAndField) {
  EmbeddingTableOptions options = Options();
  options.dim = 0;
  EXPECT_THAT(ValidateEmbeddingTableOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("embedding table 'emb': dim is 0")));
  options = Options();
  options.max_rows = -1;
  EXPECT_THAT(ValidateEmbeddingTableOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_rows is -1")));
  options = Options();
  options.name = "";
  EXPECT_THAT(
      ValidateEmbeddingTableOptions(options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no name")));
  EXPECT_OK(ValidateEmbeddingTableOptions(Options()));
}

}  // namespace
}  // namespace psflow
