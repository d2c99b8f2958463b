// ParameterClient's embedding-table calls against three in-process servers:
// routing by id hash, deduplication, gradient sums, one request per server
// for every table, SYNC steps, and errors that name the table.
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "client/batch_rows.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/job/row_placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int kNumPs = 3;

EmbeddingTableSpec Table(const std::string& name, int dim) {
  EmbeddingTableSpec spec;
  spec.set_name(name);
  spec.set_dim(dim);
  spec.mutable_initializer()->set_kind(RowInitializerConfig::UNIFORM);
  spec.mutable_initializer()->set_scale(0.5f);
  spec.mutable_initializer()->set_seed(3);
  return spec;
}

class RowsClientTest : public ::testing::Test {
 protected:
  void Start(UpdateMode mode, int workers = 1) {
    std::vector<std::unique_ptr<PsShard>> shards;
    for (int i = 0; i < kNumPs; ++i) {
      cores_.push_back(std::make_unique<ParameterServerCore>(
          ParameterServerCore::Options{}));
      shards.push_back(std::make_unique<LocalPsShard>(cores_.back().get(),
                                                      absl::StrCat("ps-", i)));
    }
    client_ = std::make_unique<ParameterClient>(std::move(shards), Placement(),
                                                ParameterClient::Options());
    ConfigureRequest config;
    config.set_protocol_version(kProtocolVersion);
    config.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
    config.mutable_learning_rate()->set_learning_rate(1.0);
    config.set_mode(mode);
    config.set_num_workers(workers);
    config.set_replicas_to_aggregate(workers);
    ASSERT_OK(client_->Configure(config));
    ASSERT_OK(client_->CreateTables({Table("emb", 4), Table("wide", 1)}));
  }

  std::vector<float> Pull(const std::string& table, int dim,
                          const std::vector<int64_t>& ids, bool train = true) {
    std::vector<float> rows(ids.size() * dim);
    ParameterClient::TableRows t;
    t.table = table;
    t.dim = dim;
    t.ids = ids;
    t.rows = absl::MakeSpan(rows);
    EXPECT_OK(client_->PullRows({t}, train));
    return rows;
  }

  std::vector<std::unique_ptr<ParameterServerCore>> cores_;
  std::unique_ptr<ParameterClient> client_;
};

TEST_F(RowsClientTest, EachServerHoldsExactlyTheRowsThatHashToIt) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < 300; ++id) ids.push_back(id * 7919);
  Pull("emb", 4, ids);
  int expected[kNumPs] = {};
  for (int64_t id : ids) ++expected[RowServer(id, kNumPs)];
  for (int s = 0; s < kNumPs; ++s) {
    const StatsResponse stats = cores_[s]->Stats();
    ASSERT_EQ(stats.tables_size(), 2);
    EXPECT_EQ(stats.tables(0).name(), "emb");
    EXPECT_EQ(stats.tables(0).rows(), expected[s]) << "ps-" << s;
    EXPECT_GT(expected[s], 50);
  }
}

TEST_F(RowsClientTest, RepeatedIdsArePulledOnceAndGetTheSameRow) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  const std::vector<float> rows = Pull("emb", 4, {5, 9, 5, 5});
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(rows[j], rows[8 + j]);
    EXPECT_EQ(rows[j], rows[12 + j]);
  }
  int64_t pulled = 0;
  for (auto& core : cores_) pulled += core->Stats().tables(0).rows_pulled();
  EXPECT_EQ(pulled, 2);
}

// A repeated id's gradients are summed into one row update (SGD, lr 1).
TEST_F(RowsClientTest, RepeatedIdsGradientsAreSummed) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  const std::vector<float> before = Pull("wide", 1, {1, 2});
  ParameterClient::TableRows t;
  t.table = "wide";
  t.dim = 1;
  const std::vector<int64_t> ids = {1, 2, 1};
  const std::vector<float> gradients = {0.5f, 2.0f, 0.25f};
  t.ids = ids;
  t.gradients = gradients;
  ASSERT_OK(client_->PushRows({t}, 0, 0));
  const std::vector<float> after = Pull("wide", 1, {1, 2});
  EXPECT_FLOAT_EQ(after[0], before[0] - 0.75f);
  EXPECT_FLOAT_EQ(after[1], before[1] - 2.0f);
  // One update per row: the summed gradient was applied once.
  int64_t pushed = 0;
  for (auto& core : cores_) pushed += core->Stats().tables(1).rows_pushed();
  EXPECT_EQ(pushed, 2);
}

TEST_F(RowsClientTest, SeveralTablesTravelTogether) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  const std::vector<int64_t> ids = {11, 12, 13, 14, 15, 16};
  std::vector<float> emb(ids.size() * 4), wide(ids.size());
  ParameterClient::TableRows a{"emb", 4, ids, absl::MakeSpan(emb), {}};
  ParameterClient::TableRows b{"wide", 1, ids, absl::MakeSpan(wide), {}};
  ASSERT_OK(client_->PullRows({a, b}, /*train=*/true));
  EXPECT_EQ(emb, Pull("emb", 4, ids));
  EXPECT_EQ(wide, Pull("wide", 1, ids));
}

TEST_F(RowsClientTest, EvaluationPullsCreateNoRows) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  // An id without a row reads zeros, the table's default row.
  EXPECT_EQ(Pull("emb", 4, {1, 2, 3}, /*train=*/false),
            std::vector<float>(12, 0.0f));
  for (auto& core : cores_) EXPECT_EQ(core->Stats().tables(0).rows(), 0);
  // Once a training pull created them, evaluation reads the rows.
  const std::vector<float> created = Pull("emb", 4, {1, 2, 3});
  EXPECT_NE(created, std::vector<float>(12, 0.0f));
  EXPECT_EQ(Pull("emb", 4, {1, 2, 3}, /*train=*/false), created);
}

TEST_F(RowsClientTest, SyncPullsWaitForEveryWorkersPush) {
  ASSERT_NO_FATAL_FAILURE(Start(SYNC, /*workers=*/2));
  const std::vector<float> before = Pull("wide", 1, {1});
  const std::vector<int64_t> ids = {1};
  const std::vector<float> one = {1.0f}, three = {3.0f};
  ParameterClient::TableRows w0{"wide", 1, ids, {}, one};
  ParameterClient::TableRows w1{"wide", 1, ids, {}, three};
  ASSERT_OK(client_->PushRows({w0}, /*version=*/0, /*worker=*/0));
  // Worker 0's pull for step 1 waits until worker 1 pushed step 0.
  std::vector<float> waited(1);
  std::thread pull([&] {
    ParameterClient::TableRows t{"wide", 1, ids, absl::MakeSpan(waited), {}};
    absl::StatusOr<int64_t> version = client_->PullRows({t}, true, 1);
    ASSERT_OK(version);
    EXPECT_EQ(*version, 1);
  });
  ASSERT_OK(client_->PushRows({w1}, 0, 1));
  pull.join();
  EXPECT_FLOAT_EQ(waited[0], before[0] - 2.0f);  // the mean of 1 and 3
  // A push computed from step 0 is stale now.
  EXPECT_THAT(client_->PushRows({w0}, 0, 0),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("push of rows of 'wide' to ps-")));
}

// A rows pull writes the caller's buffer only inside Wait(): one dropped
// unwaited (a trainer's restart, an error) leaves it untouched, even when
// its servers answered.
TEST_F(RowsClientTest, ADroppedRowsPullNeverWritesTheCallersBuffer) {
  ASSERT_NO_FATAL_FAILURE(Start(SYNC, /*workers=*/1));
  const std::vector<int64_t> ids = {1, 2, 3};
  Pull("emb", 4, ids);  // creates the rows
  std::vector<float> rows(ids.size() * 4, -99.0f);
  ParameterClient::TableRows t{"emb", 4, ids, absl::MakeSpan(rows), {}};
  std::shared_ptr<RowsHandle> pull = client_->StartPullRows({t}, true, 1);
  // Step 1 completes: the servers answer the waiting pull.
  const std::vector<float> zeros(ids.size() * 4, 0.0f);
  ASSERT_OK(client_->PushRows({{"emb", 4, ids, {}, zeros}}, 0, 0));
  pull = nullptr;
  EXPECT_THAT(rows, ::testing::Each(-99.0f));
  // Waited, it delivers.
  pull = client_->StartPullRows({t}, true, 1);
  ASSERT_OK(pull->Wait());
  EXPECT_EQ(pull->version(), 1);
  EXPECT_NE(rows[0], -99.0f);
}

// A rows pull waiting for a step that never comes ends at CancelInFlight
// (a trainer whose run failed), and still leaves the buffer untouched.
TEST_F(RowsClientTest, CancelInFlightEndsAWaitingRowsPull) {
  ASSERT_NO_FATAL_FAILURE(Start(SYNC, /*workers=*/2));
  const std::vector<int64_t> ids = {1, 2, 3};
  std::vector<float> rows(ids.size() * 4, -99.0f);
  ParameterClient::TableRows t{"emb", 4, ids, absl::MakeSpan(rows), {}};
  std::shared_ptr<RowsHandle> pull = client_->StartPullRows({t}, true, 5);
  client_->CancelInFlight();
  EXPECT_FALSE(pull->Wait().ok());
  EXPECT_THAT(rows, ::testing::Each(-99.0f));
}

// A rows push sums (copies) its gradients when it starts: the caller may
// reuse its buffers before the push ends.
TEST_F(RowsClientTest, ARowsPushCopiesItsGradientsWhenItStarts) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  const std::vector<float> before = Pull("wide", 1, {5, 6});
  const std::vector<int64_t> ids = {5, 6, 5};
  std::vector<float> gradients = {1.0f, 2.0f, 3.0f};
  std::shared_ptr<RowsHandle> push = client_->StartPushRows(
      {{"wide", 1, ids, {}, gradients}}, /*version=*/0, /*worker=*/0);
  std::fill(gradients.begin(), gradients.end(), 1000.0f);
  ASSERT_OK(push->Wait());
  const std::vector<float> after = Pull("wide", 1, {5, 6});
  EXPECT_FLOAT_EQ(after[0], before[0] - 4.0f);  // 1 + 3, SGD at rate 1
  EXPECT_FLOAT_EQ(after[1], before[1] - 2.0f);
}

// Ids the caller promises distinct (BatchRows') skip the client's
// deduplication and land on the same rows.
TEST_F(RowsClientTest, DistinctIdsGetTheSameRowsWithoutDeduplication) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < 50; ++id) ids.push_back(id * 7919);
  const std::vector<float> deduplicated = Pull("emb", 4, ids);
  std::vector<float> rows(ids.size() * 4);
  ParameterClient::TableRows t{"emb", 4, ids, absl::MakeSpan(rows), {}, true};
  ASSERT_OK(client_->PullRows({t}, true));
  EXPECT_EQ(rows, deduplicated);
}

TEST_F(RowsClientTest, ErrorsNameTheTable) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  std::vector<float> rows(3);
  const std::vector<int64_t> ids = {1};
  ParameterClient::TableRows missing{"nope", 3, ids, absl::MakeSpan(rows), {}};
  EXPECT_THAT(client_->PullRows({missing}, true),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no embedding table 'nope'")));
  ParameterClient::TableRows short_buffer{
      "emb", 4, ids, absl::MakeSpan(rows), {}};
  EXPECT_THAT(client_->PullRows({short_buffer}, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'emb': 1 ids of dimension 4 need 4")));
  const std::vector<float> nan = {std::nanf("")};
  ParameterClient::TableRows bad{"wide", 1, ids, {}, nan};
  EXPECT_THAT(
      client_->PushRows({bad}, 0, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not finite")));
  // Creating a table again with another spec is refused.
  EXPECT_THAT(client_->CreateTables({Table("emb", 8)}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("exists with another spec")));
  EXPECT_OK(client_->CreateTables({Table("emb", 4)}));
}

// A table of some fields holds rows of those fields' ids only: the batch
// pulls and pushes no row of another field's ids from it.
TEST_F(RowsClientTest, BatchRowsTouchOnlyTheFieldsATableServes) {
  ASSERT_NO_FATAL_FAILURE(Start(ASYNC));
  BatchRows rows(
      {ModelTable{Table("emb", 4), {}}, ModelTable{Table("wide", 1), {1}}});
  Batch batch;
  batch.size = 2;
  batch.num_fields = 2;
  // Example 0: field 0 {10, 11}, field 1 {20}; example 1: {10}, {21, 20}.
  batch.ids = {10, 11, 20, 10, 21, 20};
  batch.offsets = {0, 2, 3, 4, 6};
  ASSERT_OK(rows.Prepare(batch));
  const SparseBatch& sparse = rows.sparse();
  EXPECT_EQ(sparse.num_unique, 4);
  ASSERT_EQ(sparse.table_rows.size(), 2u);
  EXPECT_EQ(sparse.table_rows[0], 4);
  EXPECT_EQ(sparse.table_rows[1], 2);
  EXPECT_EQ(std::vector<int32_t>(sparse.table_slots[0].begin(),
                                 sparse.table_slots[0].end()),
            std::vector<int32_t>(sparse.slots.begin(), sparse.slots.end()));
  EXPECT_EQ(std::vector<int32_t>(sparse.table_slots[1].begin(),
                                 sparse.table_slots[1].end()),
            (std::vector<int32_t>{-1, -1, 0, -1, 1, 0}));
  EXPECT_EQ(sparse.rows[1].size(), 2u);
  ASSERT_OK(rows.Pull(*client_, /*train=*/true, 0));
  ASSERT_OK(rows.Push(*client_, 0, 0));
  int64_t emb = 0, wide = 0;
  for (auto& core : cores_) {
    emb += core->Stats().tables(0).rows();
    wide += core->Stats().tables(1).rows();
  }
  EXPECT_EQ(emb, 4);
  EXPECT_EQ(wide, 2) << "only field 1's ids 20 and 21";
}

}  // namespace
}  // namespace psflow
