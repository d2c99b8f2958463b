// Embedding tables through SaveShard and RestoreShard: rows with their
// slots, update counts and last use, restored onto 1 and 3 servers from a
// checkpoint written by 2, with damage and mismatches refused.
#include "ps/table_checkpoint.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/job/row_placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "ps/shard_checkpoint.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 3;

std::unique_ptr<ParameterServerCore> MakeServer(
    OptimizerConfig::Kind kind = OptimizerConfig::ADAGRAD, int dim = kDim,
    UpdateMode mode = ASYNC) {
  auto core =
      std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(kind);
  config.mutable_learning_rate()->set_learning_rate(0.1);
  config.set_mode(mode);
  config.set_num_workers(1);
  config.set_replicas_to_aggregate(1);
  EXPECT_OK(core->Configure(config));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  EmbeddingTableSpec* table = create.add_tables();
  table->set_name("emb");
  table->set_dim(dim);
  table->mutable_initializer()->set_seed(5);
  EXPECT_OK(core->CreateVariables(create));
  return core;
}

EmbeddingTable* TableOf(ParameterServerCore& core) {
  absl::StatusOr<std::vector<EmbeddingTable*>> tables = core.ListTables();
  EXPECT_OK(tables);
  return tables->at(0);
}

// The ids' rows on whichever of `servers` holds them.
std::vector<float> Rows(
    std::vector<std::unique_ptr<ParameterServerCore>>& servers,
    const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int s = RowServer(ids[i], static_cast<int>(servers.size()));
    EXPECT_OK(TableOf(*servers[s])
                  ->Pull({ids[i]}, /*train=*/false,
                         absl::MakeSpan(out).subspan(i * kDim, kDim)));
  }
  return out;
}

void Push(std::vector<std::unique_ptr<ParameterServerCore>>& servers,
          const std::vector<int64_t>& ids, float g) {
  for (int64_t id : ids) {
    const int s = RowServer(id, static_cast<int>(servers.size()));
    std::vector<float> gradient(kDim, g * static_cast<float>(id % 7 + 1));
    ASSERT_OK(TableOf(*servers[s])->Push({id}, gradient, 0, 0));
  }
}

class TableCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/table_ckpt_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_OK(RemoveRecursively(dir_));
    ASSERT_OK(MakeDirectories(dir_));
    for (int64_t i = 0; i < 500; ++i) ids_.push_back(i * 1000003 - 70000);
  }

  // Saves every server into data-<i>; returns the responses.
  std::vector<SaveShardResponse> Save(
      std::vector<std::unique_ptr<ParameterServerCore>>& servers,
      int64_t sync_step = 0) {
    std::vector<SaveShardResponse> saved;
    for (size_t i = 0; i < servers.size(); ++i) {
      SaveShardRequest request;
      request.set_protocol_version(kProtocolVersion);
      request.set_path(absl::StrCat(dir_, "/data-", i));
      request.set_sync_step(sync_step);
      absl::StatusOr<SaveShardResponse> response =
          SaveShard(*servers[i], request, absl::Now() + absl::Seconds(30));
      EXPECT_OK(response);
      saved.push_back(*response);
    }
    return saved;
  }

  // The restore request for server `index` of `count`.
  RestoreShardRequest RestoreRequest(
      const std::vector<SaveShardResponse>& saved, int index, int count,
      int64_t step = 9) {
    RestoreShardRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_global_step(step);
    request.set_ps_index(index);
    request.set_num_ps(count);
    RestoreTableTarget* target = request.add_tables();
    target->set_table("emb");
    target->set_dim(saved[0].tables(0).dim());
    for (const std::string& slot : saved[0].tables(0).slots()) {
      target->add_slots(slot);
    }
    for (size_t i = 0; i < saved.size(); ++i) {
      for (const SavedRowSegment& s : saved[i].tables(0).segments()) {
        RestoreRowSegment* segment = target->add_segments();
        segment->set_path(absl::StrCat(dir_, "/data-", i));
        segment->set_file_offset(s.file_offset());
        segment->set_num_rows(s.num_rows());
        segment->set_bytes(s.bytes());
        segment->set_crc32c(s.crc32c());
      }
    }
    return request;
  }

  std::string dir_;
  std::vector<int64_t> ids_;
};

TEST_F(TableCheckpointTest, RestoresOntoAnyNumberOfServers) {
  std::vector<std::unique_ptr<ParameterServerCore>> original;
  for (int i = 0; i < 2; ++i) original.push_back(MakeServer());
  Push(original, ids_, 1.0f);
  Push(original, ids_, -0.5f);
  const std::vector<SaveShardResponse> saved = Save(original);
  int64_t rows = 0;
  for (const auto& s : saved) {
    ASSERT_EQ(s.tables_size(), 1);
    EXPECT_EQ(s.tables(0).slots(0), "accumulator");
    for (const auto& segment : s.tables(0).segments()) {
      rows += segment.num_rows();
      EXPECT_EQ(segment.bytes(), segment.num_rows() * SavedRowBytes(kDim, 1));
    }
  }
  EXPECT_EQ(rows, 500);
  for (int count : {1, 3}) {
    std::vector<std::unique_ptr<ParameterServerCore>> restored;
    for (int i = 0; i < count; ++i) restored.push_back(MakeServer());
    int64_t held = 0;
    for (int i = 0; i < count; ++i) {
      ASSERT_OK(RestoreShard(*restored[i], RestoreRequest(saved, i, count)));
      EXPECT_EQ(TableOf(*restored[i])->Version(), 9);
      held += TableOf(*restored[i])->Stats().rows;
    }
    EXPECT_EQ(held, 500) << count << " servers";
    EXPECT_EQ(Rows(restored, ids_), Rows(original, ids_)) << count;
    // The accumulators and update counts came back too: the next update
    // is the same on both layouts.
    Push(restored, ids_, 2.0f);
    std::vector<std::unique_ptr<ParameterServerCore>> reference;
    for (int i = 0; i < 2; ++i) reference.push_back(MakeServer());
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK(RestoreShard(*reference[i], RestoreRequest(saved, i, 2)));
    }
    Push(reference, ids_, 2.0f);
    EXPECT_EQ(Rows(restored, ids_), Rows(reference, ids_)) << count;
  }
}

TEST_F(TableCheckpointTest, ADamagedSegmentChangesNothing) {
  std::vector<std::unique_ptr<ParameterServerCore>> original;
  original.push_back(MakeServer());
  Push(original, ids_, 1.0f);
  const std::vector<SaveShardResponse> saved = Save(original);
  // Flip one byte of the first segment's rows.
  const std::string path = dir_ + "/data-0";
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(path));
  bytes[saved[0].tables(0).segments(0).file_offset() + 100] ^= 1;
  ASSERT_OK(RemoveRecursively(path));
  ASSERT_OK(WriteFileAtomically(path, bytes));
  std::vector<std::unique_ptr<ParameterServerCore>> target;
  target.push_back(MakeServer());
  Push(target, {42}, 1.0f);
  const std::vector<float> before = Rows(target, {42});
  EXPECT_THAT(RestoreShard(*target[0], RestoreRequest(saved, 0, 1)),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("rows of embedding table 'emb') fail their "
                                 "CRC-32C check")));
  EXPECT_EQ(Rows(target, {42}), before);
  EXPECT_EQ(TableOf(*target[0])->Stats().rows, 1);
}

TEST_F(TableCheckpointTest, MismatchesAreRefusedBeforeReading) {
  std::vector<std::unique_ptr<ParameterServerCore>> original;
  original.push_back(MakeServer());
  Push(original, ids_, 1.0f);
  const std::vector<SaveShardResponse> saved = Save(original);
  // A table of another dimension.
  auto wide = MakeServer(OptimizerConfig::ADAGRAD, kDim + 1);
  EXPECT_THAT(RestoreShard(*wide, RestoreRequest(saved, 0, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("saved with dimension 3 but has 4")));
  // A restore that leaves the table out.
  RestoreShardRequest none = RestoreRequest(saved, 0, 1);
  none.clear_tables();
  auto server = MakeServer();
  EXPECT_THAT(RestoreShard(*server, none),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("leaves embedding table 'emb' out")));
  // A segment whose size does not match its rows.
  RestoreShardRequest bad = RestoreRequest(saved, 0, 1);
  bad.mutable_tables(0)->mutable_segments(0)->set_bytes(7);
  EXPECT_THAT(RestoreShard(*server, bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("index is damaged")));
  // A server index outside the layout.
  EXPECT_THAT(RestoreShard(*server, RestoreRequest(saved, 2, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("names server 2 of 2")));
}

// Adagrad rows restore into an SGD job (slots dropped) and into FTRL
// (its "accumulator" restored, "linear" starting at zero).
TEST_F(TableCheckpointTest, RowsRestoreUnderAnotherOptimizer) {
  std::vector<std::unique_ptr<ParameterServerCore>> original;
  original.push_back(MakeServer());
  Push(original, ids_, 1.0f);
  const std::vector<SaveShardResponse> saved = Save(original);
  std::vector<std::unique_ptr<ParameterServerCore>> sgd;
  sgd.push_back(MakeServer(OptimizerConfig::SGD));
  ASSERT_OK(RestoreShard(*sgd[0], RestoreRequest(saved, 0, 1)));
  EXPECT_EQ(Rows(sgd, ids_), Rows(original, ids_));
  std::vector<std::unique_ptr<ParameterServerCore>> ftrl;
  ftrl.push_back(MakeServer(OptimizerConfig::FTRL));
  ASSERT_OK(RestoreShard(*ftrl[0], RestoreRequest(saved, 0, 1)));
  bool checked = false;
  TableOf(*ftrl[0])->VisitStripe(0, [&](const SavedRow& row) {
    // accumulator (>= 0.1 + g^2) then linear (0).
    EXPECT_GT(row.data[kDim], 0.1f);
    EXPECT_EQ(row.data[2 * kDim], 0.0f);
    checked = true;
  });
  EXPECT_TRUE(checked);
}

TEST_F(TableCheckpointTest, ASyncSaveWaitsForTheTablesStep) {
  std::vector<std::unique_ptr<ParameterServerCore>> servers;
  servers.push_back(MakeServer(OptimizerConfig::SGD, kDim, SYNC));
  EmbeddingTable* table = TableOf(*servers[0]);
  HoldRequest hold;
  hold.set_protocol_version(kProtocolVersion);
  hold.set_action(HoldRequest::HOLD_AT);
  hold.set_step(1);
  hold.set_lease_ms(60000);
  ASSERT_OK(servers[0]->Hold(hold));
  std::vector<float> gradient(kDim, 1.0f);
  // Step 0's push completes step 1 while the save waits for it.
  std::thread push([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_OK(table->Push({7}, gradient, 0, 0));
  });
  const std::vector<SaveShardResponse> saved = Save(servers, /*sync_step=*/1);
  push.join();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].tables(0).version(), 1);
  EXPECT_EQ(saved[0].tables(0).segments(0).num_rows(), 1);
}

}  // namespace
}  // namespace psflow
