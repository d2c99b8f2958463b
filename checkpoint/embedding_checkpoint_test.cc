// Embedding tables through the whole checkpoint library: saved by two
// in-process servers, indexed, restored onto one and three, verified,
// exported as <table>/ids and <table>/values, and refused when the model
// does not have them.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/export.h"
#include "checkpoint/index_file.h"
#include "checkpoint/paths.h"
#include "checkpoint/reader.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/job/placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kDim = 4;

// `num_ps` in-process servers holding "dense" (3 x 2) and, with `tables`,
// the embedding table "emb" (dimension 4, Adagrad).
// `last_budget`: the last server's --max_variable_bytes (0: none);
// `extra_table`: a second table "emb1" like "emb".
struct Cluster {
  explicit Cluster(int num_ps, bool tables = true, int64_t last_budget = 0,
                   bool extra_table = false) {
    absl::StatusOr<Placement> placed =
        PlaceVariables({{"dense", {3, 2}}}, num_ps, 1 << 20);
    EXPECT_OK(placed);
    placement = *placed;
    if (tables) placement.tables.push_back({"emb", kDim});
    if (extra_table) placement.tables.push_back({"emb1", kDim});
    std::vector<std::unique_ptr<PsShard>> shards;
    for (int i = 0; i < num_ps; ++i) {
      ParameterServerCore::Options options;
      if (i == num_ps - 1) options.max_variable_bytes = last_budget;
      cores.push_back(std::make_unique<ParameterServerCore>(options));
      shards.push_back(std::make_unique<LocalPsShard>(cores.back().get(),
                                                      absl::StrCat("ps-", i)));
    }
    client = std::make_unique<ParameterClient>(std::move(shards), placement,
                                               ParameterClient::Options());
    configure.set_protocol_version(kProtocolVersion);
    configure.mutable_optimizer()->set_kind(OptimizerConfig::ADAGRAD);
    configure.mutable_learning_rate()->set_learning_rate(0.1);
    configure.set_mode(ASYNC);
    configure.set_num_workers(1);
    configure.set_replicas_to_aggregate(1);
    EXPECT_OK(client->Configure(configure));
    EXPECT_OK(client->CreateVariables());
    if (tables) {
      std::vector<EmbeddingTableSpec> specs;
      for (const char* name : {"emb", "emb1"}) {
        if (std::string(name) == "emb1" && !extra_table) continue;
        EmbeddingTableSpec& spec = specs.emplace_back();
        spec.set_name(name);
        spec.set_dim(kDim);
        spec.mutable_initializer()->set_seed(9);
      }
      EXPECT_OK(client->CreateTables(specs));
    }
  }

  void Train(const std::vector<int64_t>& ids, float g,
             const std::string& table = "emb") {
    std::vector<float> gradients(ids.size() * kDim);
    for (size_t i = 0; i < gradients.size(); ++i) {
      gradients[i] = g * static_cast<float>(i % 5 + 1);
    }
    ParameterClient::TableRows t{table, kDim, ids, {}, gradients};
    EXPECT_OK(client->PushRows({t}, 0, 0));
  }

  std::vector<float> Rows(const std::vector<int64_t>& ids) {
    std::vector<float> rows(ids.size() * kDim);
    ParameterClient::TableRows t{"emb", kDim, ids, absl::MakeSpan(rows), {}};
    EXPECT_OK(client->PullRows({t}, /*train=*/false));
    return rows;
  }

  int64_t RowsHeld() {
    int64_t rows = 0;
    for (auto& core : cores) rows += core->Stats().tables(0).rows();
    return rows;
  }

  Placement placement;
  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::unique_ptr<ParameterClient> client;
  ConfigureRequest configure;
};

class EmbeddingCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = AbsolutePath(absl::StrCat(
        ::testing::TempDir(), "/emb_ckpt_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    ASSERT_OK(RemoveRecursively(dir_));
    for (int64_t i = 0; i < 1000; ++i) ids_.push_back(i * 7919 + 13);
  }

  SavedCheckpoint Save(Cluster& cluster) {
    CheckpointManagerOptions options;
    options.directory = dir_;
    options.job_name = "ctr";
    options.optimizer = cluster.configure.optimizer();
    options.mode = ASYNC;
    absl::StatusOr<std::unique_ptr<CheckpointManager>> manager =
        CheckpointManager::Create(options, cluster.client.get());
    EXPECT_OK(manager);
    absl::StatusOr<SavedCheckpoint> saved = (*manager)->Save();
    EXPECT_OK(saved);
    return *saved;
  }

  std::string dir_;
  std::vector<int64_t> ids_;
};

TEST_F(EmbeddingCheckpointTest, TablesRestoreOntoOneAndThreeServers) {
  Cluster two(2);
  two.Train(ids_, 1.0f);
  two.Train(ids_, -0.25f);
  const SavedCheckpoint saved = Save(two);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  EXPECT_EQ(reader->index().format_version(), 2u);
  const CheckpointTable* table = reader->FindTable("emb");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->num_rows(), 1000);
  EXPECT_EQ(table->dim(), kDim);
  EXPECT_EQ(table->slots(0), "accumulator");
  EXPECT_THAT(reader->Verify(), IsEmpty());
  for (int servers : {1, 3}) {
    Cluster restored(servers);
    restored.Train({1, 2, 3}, 5.0f);  // state the restore replaces
    ASSERT_OK(RestoreCheckpoint(saved.path, restored.configure.optimizer(),
                                *restored.client, absl::Seconds(10)));
    EXPECT_EQ(restored.RowsHeld(), 1000) << servers;
    EXPECT_EQ(restored.Rows(ids_), two.Rows(ids_)) << servers;
    // The accumulators came back: the next update agrees.
    Cluster again(2);
    ASSERT_OK(RestoreCheckpoint(saved.path, again.configure.optimizer(),
                                *again.client, absl::Seconds(10)));
    again.Train(ids_, 0.5f);
    restored.Train(ids_, 0.5f);
    EXPECT_EQ(restored.Rows(ids_), again.Rows(ids_)) << servers;
  }
}

// Rows that will not fit a server's memory budget are found while the
// restore is checked, before any server changes: a commit that ran out of
// room halfway would leave the model partly restored.
TEST_F(EmbeddingCheckpointTest, ARestoreWithoutRoomChangesNoServer) {
  Cluster one(1);
  one.Train(ids_, 1.0f);
  const SavedCheckpoint saved = Save(one);
  Cluster target(2, true, /*last_budget=*/8192);
  const std::vector<int64_t> mine = {1, 2, 3, 4, 5, 6, 7, 8};
  target.Train(mine, 5.0f);
  const std::vector<float> before = target.Rows(mine);
  const int64_t rows[] = {target.cores[0]->Stats().tables(0).rows(),
                          target.cores[1]->Stats().tables(0).rows()};
  EXPECT_THAT(RestoreCheckpoint(saved.path, target.configure.optimizer(),
                                *target.client, absl::Seconds(30)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("nothing was restored"),
                             HasSubstr("--max_variable_bytes"))));
  EXPECT_EQ(target.cores[0]->Stats().tables(0).rows(), rows[0]);
  EXPECT_EQ(target.cores[1]->Stats().tables(0).rows(), rows[1]);
  EXPECT_EQ(target.Rows(mine), before);
}

// The budget holds the restored rows, whichever table grows: each table is
// emptied before any is refilled, so one table's new rows never sit beside
// another's old ones.
TEST_F(EmbeddingCheckpointTest, ARestoreThatFitsFitsWhicheverTableGrows) {
  const std::vector<int64_t> many(ids_.begin(), ids_.begin() + 600);
  const std::vector<int64_t> few(ids_.begin() + 600, ids_.begin() + 610);
  // Both ways round, so that the table restored first is the one growing
  // in one of them. Rows cost 66 bytes here (4 values, 4 Adagrad slots,
  // metadata, index); 48 bytes of dense values and slots; room for 700.
  for (const auto& [grows, shrinks] :
       {std::pair<std::string, std::string>{"emb", "emb1"},
        std::pair<std::string, std::string>{"emb1", "emb"}}) {
    ASSERT_OK(RemoveRecursively(dir_));
    Cluster source(1, true, 0, /*extra_table=*/true);
    source.Train(many, 1.0f, grows);
    source.Train(few, 1.0f, shrinks);
    const SavedCheckpoint saved = Save(source);
    Cluster target(1, true, /*last_budget=*/48 + 700 * 66,
                   /*extra_table=*/true);
    target.Train(few, 2.0f, grows);
    target.Train(many, 2.0f, shrinks);
    EXPECT_THAT(RestoreCheckpoint(saved.path, target.configure.optimizer(),
                                  *target.client, absl::Seconds(30)),
                IsOk())
        << grows << " grows";
  }
}

TEST_F(EmbeddingCheckpointTest, ExportWritesIdsAndValues) {
  Cluster cluster(2);
  cluster.Train(ids_, 1.0f);
  const SavedCheckpoint saved = Save(cluster);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  ExportOptions options;
  options.format = ExportFormat::kSafetensors;
  ASSERT_OK_AND_ASSIGN(
      int n, ExportCheckpoint(*reader, dir_ + "/m.safetensors", options));
  EXPECT_EQ(n, 3);  // dense, emb/ids, emb/values
  ASSERT_OK_AND_ASSIGN(std::string st,
                       ReadFileToString(dir_ + "/m.safetensors"));
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | uint8_t(st[i]);
  const std::string json = st.substr(8, header);
  EXPECT_THAT(json,
              HasSubstr("\"emb/ids\":{\"dtype\":\"I64\",\"shape\":[1000]"));
  EXPECT_THAT(
      json, HasSubstr("\"emb/values\":{\"dtype\":\"F32\",\"shape\":[1000,4]"));
  // Every exported row is the row the servers hold for its id.
  const size_t ids_at = 8 + header + 6 * 4;
  std::vector<int64_t> ids(1000);
  std::memcpy(ids.data(), st.data() + ids_at, 8000);
  std::vector<float> values(4000);
  std::memcpy(values.data(), st.data() + ids_at + 8000, 16000);
  const std::vector<float> held = cluster.Rows(ids);
  EXPECT_EQ(values, held);
  options.format = ExportFormat::kNpz;
  options.include_slots = true;
  ASSERT_OK_AND_ASSIGN(n, ExportCheckpoint(*reader, dir_ + "/m.npz", options));
  EXPECT_EQ(n, 5);  // dense and its slot; emb ids, values and slot
  ASSERT_OK_AND_ASSIGN(std::string npz, ReadFileToString(dir_ + "/m.npz"));
  EXPECT_THAT(npz, HasSubstr("emb/ids.npy"));
  EXPECT_THAT(npz, HasSubstr("'descr': '<i8'"));
  EXPECT_THAT(npz, HasSubstr("emb/values@accumulator.npy"));
}

TEST_F(EmbeddingCheckpointTest, DamagedRowsAreFoundAndRefused) {
  Cluster cluster(1);
  cluster.Train(ids_, 1.0f);
  const SavedCheckpoint saved = Save(cluster);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  const CheckpointRowSegment& segment = reader->FindTable("emb")->segments(0);
  const std::string path = saved.path + "/" + segment.file();
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(path));
  bytes[segment.file_offset() + segment.bytes() - 1] ^= 0x40;
  ASSERT_OK(RemoveRecursively(path));
  ASSERT_OK(WriteFileAtomically(path, bytes));
  ASSERT_OK_AND_ASSIGN(reader, CheckpointReader::Open(saved.path));
  const std::vector<std::string> problems = reader->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("embedding table 'emb'"));
  Cluster target(2);
  target.Train({5}, 1.0f);
  const std::vector<float> before = target.Rows({5});
  EXPECT_THAT(RestoreCheckpoint(saved.path, target.configure.optimizer(),
                                *target.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(target.Rows({5}), before);
}

// A table that lists one id twice, its CRCs made to match (a buggy writer,
// or a forger), is damage: verify says so, and a restore is refused on the
// server that would take both rows, before anything changes.
TEST_F(EmbeddingCheckpointTest, AnIdListedTwiceIsDamage) {
  Cluster cluster(1);
  cluster.Train(ids_, 1.0f);
  const SavedCheckpoint saved = Save(cluster);
  const std::string index_path = JoinPath(saved.path, kIndexFileName);
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadIndexFile(index_path));
  CheckpointRowSegment* segment = index.mutable_tables(0)->mutable_segments(0);
  ASSERT_GE(segment->num_rows(), 2);
  const std::string path = JoinPath(saved.path, segment->file());
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(path));
  int64_t first_id;
  std::memcpy(&first_id, &bytes[segment->file_offset()], 8);
  std::memcpy(&bytes[segment->file_offset() + 8], &first_id, 8);
  segment->set_crc32c(Crc32c(absl::string_view(bytes).substr(
      segment->file_offset(), segment->bytes())));
  ASSERT_OK(RemoveRecursively(path));
  ASSERT_OK(WriteFileAtomically(path, bytes));
  ASSERT_OK(RemoveRecursively(index_path));
  ASSERT_OK(WriteIndexFile(index_path, index));

  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  const std::vector<std::string> problems = reader->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(
      problems[0],
      AllOf(HasSubstr("embedding table 'emb'"),
            HasSubstr(absl::StrCat("hold id ", first_id, " a second time"))));
  Cluster target(1);
  target.Train({5}, 1.0f);
  const std::vector<float> before = target.Rows({5});
  EXPECT_THAT(RestoreCheckpoint(saved.path, target.configure.optimizer(),
                                *target.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr(absl::StrCat("hold id ", first_id,
                                              " a second time"))));
  EXPECT_EQ(target.Rows({5}), before);
}

TEST_F(EmbeddingCheckpointTest, AModelWithoutTheTableIsRefused) {
  Cluster with(1);
  with.Train(ids_, 1.0f);
  const SavedCheckpoint saved = Save(with);
  Cluster without(1, /*tables=*/false);
  EXPECT_THAT(RestoreCheckpoint(saved.path, without.configure.optimizer(),
                                *without.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("embedding table 'emb', which the model "
                                 "lacks")));
  // A dense-only checkpoint stays format version 1 (older releases read it)
  // and is refused by a model that has the table.
  ASSERT_OK(RemoveRecursively(dir_));
  const SavedCheckpoint dense = Save(without);
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(dense.path));
  EXPECT_EQ(reader->index().format_version(), 1u);
  Cluster wants(1);
  EXPECT_THAT(RestoreCheckpoint(dense.path, wants.configure.optimizer(),
                                *wants.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("embedding table 'emb' is not in it")));
}

}  // namespace
}  // namespace psflow
