// The checkpoint library against in-process parameter servers: saving,
// restoring onto another number of servers, retention, damage detection,
// the index framing and export.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/best_copy.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/export.h"
#include "checkpoint/index_file.h"
#include "checkpoint/paths.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/file_util.h"
#include "common/job/placement.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "zlib.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::vector<LogicalVariable> Model() {
  return {{"dense/kernel", {8, 5}}, {"dense/bias", {5}}, {"out", {5, 3}}};
}

ConfigureRequest Adam(UpdateMode mode = ASYNC) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  request.mutable_learning_rate()->set_learning_rate(0.01);
  request.set_mode(mode);
  request.set_num_workers(1);
  request.set_replicas_to_aggregate(1);
  return request;
}

// N in-process parameter servers with small chunks (so variables span
// several), the kernel split over all of them.
struct Cluster {
  explicit Cluster(int num_ps, UpdateMode mode = ASYNC,
                   std::vector<LogicalVariable> model = Model()) {
    absl::StatusOr<Placement> placement =
        PlaceVariables(model, num_ps, /*split_threshold_bytes=*/64);
    EXPECT_OK(placement);
    std::vector<std::unique_ptr<PsShard>> shards;
    for (int i = 0; i < num_ps; ++i) {
      cores.push_back(std::make_unique<ParameterServerCore>(
          ParameterServerCore::Options{7 * sizeof(float)}));
      shards.push_back(std::make_unique<LocalPsShard>(cores.back().get(),
                                                      absl::StrCat("ps-", i)));
    }
    client = std::make_unique<ParameterClient>(std::move(shards), *placement,
                                               ParameterClient::Options());
    configure = Adam(mode);
    EXPECT_OK(client->Configure(configure));
    EXPECT_OK(client->CreateVariables());
    for (const LogicalVariable& v : model) {
      int64_t n = 1;
      for (int64_t d : v.shape) n *= d;
      sizes[v.name] = n;
    }
  }

  std::map<std::string, std::vector<float>> Pull(int64_t* step = nullptr,
                                                 int64_t min_version = 0) {
    std::map<std::string, std::vector<float>> out;
    std::vector<ParameterClient::Mutable> targets;
    for (const auto& [name, n] : sizes) {
      out[name].resize(n);
      targets.emplace_back(name, absl::MakeSpan(out[name]));
    }
    auto handle = client->Pull(targets, min_version, true);
    EXPECT_OK(handle->Wait());
    if (step != nullptr) *step = handle->min_version();
    return out;
  }

  // One "training step": a gradient depending on `seed` for every variable.
  void Step(float seed, int64_t version = 0) {
    std::map<std::string, std::vector<float>> grads;
    std::vector<ParameterClient::Const> list;
    for (const auto& [name, n] : sizes) {
      auto& g = grads[name];
      for (int64_t i = 0; i < n; ++i) g.push_back(seed * ((i % 7) - 3.0f));
      list.emplace_back(name, absl::MakeConstSpan(g));
    }
    EXPECT_OK(client->Push(list, version)->Wait());
  }

  std::vector<std::unique_ptr<ParameterServerCore>> cores;
  std::unique_ptr<ParameterClient> client;
  ConfigureRequest configure;
  std::map<std::string, int64_t> sizes;
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = AbsolutePath(absl::StrCat(
        ::testing::TempDir(), "/ckpt_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    ASSERT_OK(RemoveRecursively(dir_));
  }

  std::unique_ptr<CheckpointManager> Manager(Cluster& cluster,
                                             int max_to_keep = 5) {
    CheckpointManagerOptions options;
    options.directory = dir_;
    options.retention.max_to_keep = max_to_keep;
    options.job_name = "test";
    options.optimizer = cluster.configure.optimizer();
    options.mode = cluster.configure.mode();
    absl::StatusOr<std::unique_ptr<CheckpointManager>> manager =
        CheckpointManager::Create(options, cluster.client.get());
    EXPECT_OK(manager);
    return *std::move(manager);
  }

  std::string dir_;
};

TEST_F(CheckpointTest, SavedOnTwoServersRestoresOnThreeAndTrainsOnIdentically) {
  Cluster two(2);
  two.Step(1.0f);
  two.Step(-0.5f);
  two.Step(0.25f);
  absl::StatusOr<SavedCheckpoint> saved = Manager(two)->Save();
  ASSERT_OK(saved);
  EXPECT_EQ(saved->step, 3);
  EXPECT_EQ(saved->path, dir_ + "/ckpt-3");

  Cluster three(3);
  three.Step(5.0f);  // state that the restore must replace entirely
  ASSERT_OK_AND_ASSIGN(
      int64_t step, RestoreCheckpoint(saved->path, three.configure.optimizer(),
                                      *three.client, absl::Seconds(10)));
  EXPECT_EQ(step, 3);
  int64_t pulled_step = 0;
  EXPECT_EQ(three.Pull(&pulled_step), two.Pull());
  EXPECT_EQ(pulled_step, 3);
  // Adam's slots and step came back too: the next updates agree exactly.
  two.Step(0.75f);
  three.Step(0.75f);
  EXPECT_EQ(three.Pull(), two.Pull());

  // The index records logical tensors with their slots.
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved->path));
  EXPECT_EQ(reader->index().num_ps(), 2);
  EXPECT_THAT(reader->index().tensors(), SizeIs(3 * 3));  // values, m, v
  const CheckpointTensor* kernel = reader->Find("dense/kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_THAT(kernel->shape(), ElementsAre(8, 5));
  EXPECT_NE(reader->Find("dense/kernel", "m"), nullptr);
  EXPECT_THAT(reader->Verify(), IsEmpty());
}

TEST_F(CheckpointTest, ValuesOnlyWhenTheOptimizerChanged) {
  Cluster source(1);
  source.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(source)->Save());
  Cluster target(2);
  OptimizerConfig sgd;
  sgd.set_kind(OptimizerConfig::SGD);
  // The target's servers run Adam but we claim another optimizer: the
  // slots must not be restored, the values must.
  ASSERT_OK(
      RestoreCheckpoint(saved.path, sgd, *target.client, absl::Seconds(10)));
  EXPECT_EQ(target.Pull(), source.Pull());
}

TEST_F(CheckpointTest, RefusesACheckpointOfAnotherModel) {
  Cluster source(2);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(source)->Save());
  Cluster other(2, ASYNC, {{"dense/kernel", {8, 6}}, {"dense/bias", {5}}});
  const auto before = other.Pull();
  EXPECT_THAT(RestoreCheckpoint(saved.path, other.configure.optimizer(),
                                *other.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("\"dense/kernel\" is [8, 5]"),
                             HasSubstr("\"out\", which the model lacks"))));
  EXPECT_EQ(other.Pull(), before);
}

// The model, not the checkpoint, decides the update rule: a variable saved
// trainable (with Adam's slots) restores as a moving average (values only),
// and a moving average, saved without slots, round-trips onto another
// number of servers.
TEST_F(CheckpointTest, MovingAveragesRestoreTheirValuesWhateverWasSaved) {
  std::vector<LogicalVariable> model = Model();
  model[0].update = VariableUpdate::kMovingAverage;  // split over every ps
  model[0].momentum = 0.5f;
  Cluster trained(2);
  trained.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(trained)->Save());
  Cluster averaged(3, ASYNC, model);
  ASSERT_OK(RestoreCheckpoint(saved.path, averaged.configure.optimizer(),
                              *averaged.client, absl::Seconds(10)));
  EXPECT_EQ(averaged.Pull(), trained.Pull());

  averaged.Step(2.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint again, Manager(averaged)->Save());
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(again.path));
  EXPECT_NE(reader->Find("dense/kernel"), nullptr);
  EXPECT_EQ(reader->Find("dense/kernel", "m"), nullptr);
  EXPECT_NE(reader->Find("dense/bias", "m"), nullptr);
  EXPECT_THAT(reader->Verify(), IsEmpty());
  Cluster back(2, ASYNC, model);
  ASSERT_OK(RestoreCheckpoint(again.path, back.configure.optimizer(),
                              *back.client, absl::Seconds(10)));
  EXPECT_EQ(back.Pull(), averaged.Pull());
  back.Step(3.0f);
  averaged.Step(3.0f);
  EXPECT_EQ(back.Pull(), averaged.Pull());
}

TEST_F(CheckpointTest, StateFileListsTheKeptCheckpointsAndOldOnesGo) {
  Cluster cluster(2);
  auto manager = Manager(cluster, /*max_to_keep=*/2);
  for (int i = 0; i < 4; ++i) {
    cluster.Step(1.0f);
    ASSERT_OK(manager->Save());
  }
  ASSERT_OK_AND_ASSIGN(CheckpointState state, ReadCheckpointState(dir_));
  EXPECT_EQ(state.model_checkpoint_path(), "ckpt-4");
  EXPECT_THAT(state.all_model_checkpoint_paths(),
              ElementsAre("ckpt-3", "ckpt-4"));
  EXPECT_THAT(state.all_model_checkpoint_timestamps(), SizeIs(2));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> entries, ListDirectory(dir_));
  EXPECT_THAT(entries, ElementsAre("checkpoint", "ckpt-3", "ckpt-4"));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> latest,
                       LatestCheckpoint(dir_));
  EXPECT_EQ(latest, dir_ + "/ckpt-4");
}

// A damaged state file is an error naming it, never "no checkpoints" (which
// would restart the job from step 0 over the checkpoints it has).
TEST_F(CheckpointTest, ADamagedStateFileIsAnErrorNotAFreshStart) {
  Cluster cluster(2);
  auto manager = Manager(cluster, /*max_to_keep=*/3);
  for (int i = 0; i < 2; ++i) {
    cluster.Step(1.0f);
    ASSERT_OK(manager->Save());
  }
  const std::string path = dir_ + "/checkpoint";
  ASSERT_OK_AND_ASSIGN(std::string good, ReadFileToString(path));
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"", "it is empty"},
      {"\n  \n", "it is empty"},
      {good.substr(0, good.find('\n') + 1), "not the last one listed"},
      {good.substr(0, good.size() / 2), "damaged"},
      {"model_checkpoint_path: \"ckpt-2\"\n"
       "all_model_checkpoint_paths: \"../../etc\"\n"
       "all_model_checkpoint_paths: \"ckpt-2\"\n"
       "all_model_checkpoint_timestamps: 1\nall_model_checkpoint_timestamps: "
       "2\n",
       "not a checkpoint's name"},
      {"garbage {{{", "does not parse: line 1"},
  };
  for (const auto& [text, why] : damaged) {
    ASSERT_OK(WriteFileAtomically(path, text));
    EXPECT_THAT(LatestCheckpoint(dir_),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(path), HasSubstr(why),
                               HasSubstr("psctl ckpt list"))))
        << text;
    EXPECT_THAT(manager->Save().status(), StatusIs(absl::StatusCode::kDataLoss))
        << text;
  }
  // The checkpoints themselves were never touched.
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> entries, ListDirectory(dir_));
  EXPECT_THAT(entries, ::testing::IsSupersetOf({"ckpt-1", "ckpt-2"}));
  ASSERT_OK(WriteFileAtomically(path, good));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> latest,
                       LatestCheckpoint(dir_));
  EXPECT_EQ(latest, dir_ + "/ckpt-2");
}

TEST(RetentionTest, KeepsOneCheckpointEveryNHours) {
  CheckpointState state;
  RetentionPolicy policy;
  policy.max_to_keep = 2;
  policy.keep_checkpoint_every_n_hours = 1;
  std::vector<std::string> deleted;
  // One checkpoint every 20 minutes for 3 hours.
  for (int i = 0; i <= 9; ++i) {
    for (const std::string& name :
         AddCheckpoint(state, CheckpointName(i), i * 1200.0, policy)) {
      deleted.push_back(name);
    }
  }
  EXPECT_THAT(state.all_model_checkpoint_paths(),
              ElementsAre("ckpt-8", "ckpt-9"));
  // ckpt-0 at t=0 starts the clock (as TensorFlow's manager creation
  // does); ckpt-3 (1 h) and ckpt-6 (2 h) stay on disk, unlisted.
  EXPECT_THAT(deleted, ElementsAre("ckpt-0", "ckpt-1", "ckpt-2", "ckpt-4",
                                   "ckpt-5", "ckpt-7"));
  EXPECT_EQ(state.last_preserved_timestamp(), 6 * 1200.0);
}

TEST_F(CheckpointTest, CrashLeftoversAreRemovedAndNeverRead) {
  ASSERT_OK(MakeDirectories(dir_ + "/ckpt.tmp-deadbeef"));
  ASSERT_OK(WriteFileAtomically(dir_ + "/ckpt.tmp-deadbeef/data-00000-of-00001",
                                "partial"));
  Cluster cluster(1);
  auto manager = Manager(cluster);
  EXPECT_FALSE(PathExists(dir_ + "/ckpt.tmp-deadbeef"));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> none, LatestCheckpoint(dir_));
  EXPECT_FALSE(none.has_value());
  // A directory without its index (crash before the index was written,
  // then renamed by hand) is not a checkpoint.
  ASSERT_OK(MakeDirectories(dir_ + "/ckpt-9"));
  EXPECT_THAT(CheckpointReader::Open(dir_ + "/ckpt-9"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("no index")));
}

TEST_F(CheckpointTest, DamageIsFoundByVerifyAndRefusedByRestore) {
  Cluster cluster(2);
  cluster.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(cluster)->Save());
  const std::string data = saved.path + "/data-00001-of-00002";
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(data));

  // A flipped bit: verify names the tensor and the file; restore refuses
  // and changes nothing.
  std::string flipped = bytes;
  flipped[5] ^= 0x01;
  ASSERT_OK(WriteFileAtomically(data, flipped));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  std::vector<std::string> problems = reader->Verify();
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0], AllOf(HasSubstr("data-00001-of-00002"),
                                 HasSubstr("CRC-32C mismatch")));
  Cluster other(3);
  other.Step(2.0f);
  const auto before = other.Pull();
  EXPECT_THAT(
      RestoreCheckpoint(saved.path, other.configure.optimizer(), *other.client,
                        absl::Seconds(10)),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("data-00001-of-00002")));
  EXPECT_EQ(other.Pull(), before);

  // Truncated: caught when the checkpoint is opened.
  ASSERT_OK(WriteFileAtomically(data, bytes.substr(0, bytes.size() - 4)));
  EXPECT_THAT(CheckpointReader::Open(saved.path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  EXPECT_THAT(RestoreCheckpoint(saved.path, other.configure.optimizer(),
                                *other.client, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(other.Pull(), before);
}

TEST_F(CheckpointTest, IndexFramingCatchesEveryKindOfDamage) {
  Cluster cluster(1);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(cluster)->Save());
  ASSERT_OK_AND_ASSIGN(std::string bytes,
                       ReadFileToString(saved.path + "/index"));
  ASSERT_OK(DecodeIndexFile(bytes, "index"));
  EXPECT_THAT(DecodeIndexFile(bytes.substr(0, bytes.size() - 1), "index"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  std::string flipped = bytes;
  flipped[30] ^= 0x40;
  EXPECT_THAT(DecodeIndexFile(flipped, "index"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC-32C")));
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_THAT(DecodeIndexFile(magic, "index"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("magic")));
  EXPECT_THAT(DecodeIndexFile("", "index"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("too short")));
}

// A worker keeps taking sync steps while the chief saves: every slice of
// the checkpoint is at the same step.
TEST_F(CheckpointTest, SyncCheckpointsAreAtOneStepBoundary) {
  Cluster cluster(2, SYNC);
  auto manager = Manager(cluster);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    for (int64_t step = 0; !stop.load(); ++step) {
      cluster.Pull(nullptr, step);  // as a sync worker does
      cluster.Step(0.01f * (step % 5 + 1), step);
    }
  });
  std::vector<int64_t> steps;
  for (int i = 0; i < 5; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    absl::StatusOr<SavedCheckpoint> saved = manager->Save();
    ASSERT_OK(saved);
    ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved->path));
    EXPECT_EQ(reader->index().min_version(), reader->index().max_version());
    EXPECT_EQ(reader->index().global_step(), reader->index().max_version());
    steps.push_back(saved->step);
  }
  stop = true;
  worker.join();
  EXPECT_GT(steps.back(), steps.front());
}

TEST_F(CheckpointTest, ExportsSafetensorsAndNpz) {
  Cluster cluster(2);
  cluster.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(cluster)->Save());
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  ExportOptions options;
  ASSERT_OK_AND_ASSIGN(
      int n, ExportCheckpoint(*reader, dir_ + "/m.safetensors", options));
  EXPECT_EQ(n, 3);
  ASSERT_OK_AND_ASSIGN(std::string st,
                       ReadFileToString(dir_ + "/m.safetensors"));
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | uint8_t(st[i]);
  EXPECT_EQ(header % 8, 0u);
  const std::string json = st.substr(8, header);
  EXPECT_THAT(json,
              HasSubstr("\"dense/kernel\":{\"dtype\":\"F32\",\"shape\":[8,5]"));
  EXPECT_EQ(st.size(), 8 + header + (40 + 5 + 15) * 4);
  // The kernel comes first: its bytes are where the header says and equal
  // what the servers hold.
  EXPECT_THAT(json, HasSubstr("\"shape\":[8,5],\"data_offsets\":[0,160]"));
  const std::vector<float> kernel = cluster.Pull()["dense/kernel"];
  ASSERT_EQ(kernel.size(), 40u);
  EXPECT_EQ(st.substr(8 + header, 160),
            std::string(reinterpret_cast<const char*>(kernel.data()), 160));
  options.format = ExportFormat::kNpz;
  options.include_slots = true;
  ASSERT_OK_AND_ASSIGN(n, ExportCheckpoint(*reader, dir_ + "/m.npz", options));
  EXPECT_EQ(n, 9);
  EXPECT_THAT(ParseExportFormat("hdf5"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("safetensors or npz")));
}

// The caller's metadata (the model config, the layouts) reaches both
// formats: safetensors' __metadata__ and the npz's JSON member, beside the
// global step.
TEST_F(CheckpointTest, ExportsCarryTheGivenMetadataInBothFormats) {
  Cluster cluster(1);
  cluster.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, Manager(cluster)->Save());
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  ExportOptions options;
  options.metadata["layout"] = "kernels [in, out]";
  options.metadata["model"] = R"({"mlp":{"hiddenSizes":["4"]}})";
  ASSERT_OK(ExportCheckpoint(*reader, dir_ + "/m.safetensors", options));
  ASSERT_OK_AND_ASSIGN(std::string st,
                       ReadFileToString(dir_ + "/m.safetensors"));
  const std::string expected = absl::StrCat(
      R"({"format":"pt","global_step":")", reader->index().global_step(),
      R"(","layout":"kernels [in, out]",)",
      R"("model":"{\"mlp\":{\"hiddenSizes\":[\"4\"]}}","producer":"psflow"})");
  EXPECT_THAT(st, HasSubstr("{\"__metadata__\":" + expected));
  options.format = ExportFormat::kNpz;
  ASSERT_OK_AND_ASSIGN(int n,
                       ExportCheckpoint(*reader, dir_ + "/m.npz", options));
  EXPECT_EQ(n, 3);  // tensors; the metadata member is not one
  ASSERT_OK_AND_ASSIGN(std::string npz, ReadFileToString(dir_ + "/m.npz"));
  // The member's name, then its bytes: the same object less "format".
  EXPECT_THAT(npz, HasSubstr(absl::StrCat(
                       kNpzMetadataMember, R"({"global_step":")",
                       reader->index().global_step(), R"(","layout")")));
}

// A tensor larger than the reader's piece streams through export in
// bounded pieces (never held whole) and comes out byte for byte, in both
// formats; a damaged checkpoint leaves no output file behind.
TEST_F(CheckpointTest, ExportStreamsTensorsLargerThanAPiece) {
  const int64_t n = 5 * 1100000;  // 22 MB: two 16 MiB pieces
  static_assert(5 * 1100000 * 4 > CheckpointReader::kMaxPieceBytes);
  ASSERT_OK_AND_ASSIGN(
      Placement placement,
      PlaceVariables({{"big", {5, 1100000}}}, 1, int64_t{1} << 40));
  ParameterServerCore core(ParameterServerCore::Options{int64_t{64} << 20});
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<LocalPsShard>(&core, "ps-0"));
  ParameterClient client(std::move(shards), placement,
                         ParameterClient::Options());
  ASSERT_OK(client.Configure(Adam()));
  ASSERT_OK(client.CreateVariables());
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000) / 8;
  ASSERT_OK(client.Assign({{"big", absl::MakeConstSpan(values)}})->Wait());
  CheckpointManagerOptions manager_options;
  manager_options.directory = dir_;
  manager_options.job_name = "test";
  manager_options.optimizer = Adam().optimizer();
  ASSERT_OK_AND_ASSIGN(auto manager,
                       CheckpointManager::Create(manager_options, &client));
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint saved, manager->Save());
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(saved.path));
  const std::string bytes(reinterpret_cast<const char*>(values.data()),
                          n * sizeof(float));

  ExportOptions options;
  ASSERT_OK_AND_ASSIGN(
      int count, ExportCheckpoint(*reader, dir_ + "/big.safetensors", options));
  EXPECT_EQ(count, 1);
  ASSERT_OK_AND_ASSIGN(std::string st,
                       ReadFileToString(dir_ + "/big.safetensors", 1 << 30));
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | uint8_t(st[i]);
  ASSERT_EQ(st.size(), 8 + header + bytes.size());
  EXPECT_TRUE(st.compare(8 + header, bytes.size(), bytes) == 0);

  options.format = ExportFormat::kNpz;
  ASSERT_OK(ExportCheckpoint(*reader, dir_ + "/big.npz", options).status());
  ASSERT_OK_AND_ASSIGN(std::string npz,
                       ReadFileToString(dir_ + "/big.npz", 1 << 30));
  const size_t data = npz.find(bytes);
  ASSERT_NE(data, std::string::npos) << "the values, contiguous";
  // The data descriptor after them holds the entry's CRC-32 (of the .npy
  // header and values), as the central directory does.
  const size_t npy = npz.find("\x93NUMPY");
  ASSERT_NE(npy, std::string::npos);
  const std::string entry = npz.substr(npy, data + bytes.size() - npy);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(entry.data()), entry.size()));
  const std::string descriptor = npz.substr(data + bytes.size(), 16);
  uint32_t stored = 0;
  for (int i = 7; i >= 4; --i) stored = (stored << 8) | uint8_t(descriptor[i]);
  EXPECT_EQ(descriptor.substr(0, 4), std::string("PK\x07\x08"));
  EXPECT_EQ(stored, crc);

  // Damage in the middle of the tensor: no file, no leftover.
  const std::string data_file = saved.path + "/" + DataFileName(0, 1);
  ASSERT_OK_AND_ASSIGN(std::string shard, ReadFileToString(data_file, 1 << 30));
  const CheckpointTensor* big = reader->Find("big");
  ASSERT_NE(big, nullptr);
  shard[big->slices(0).file_offset() + bytes.size() / 2] ^= 0x40;
  ASSERT_OK(WriteFileAtomically(data_file, shard));
  ASSERT_OK_AND_ASSIGN(auto damaged, CheckpointReader::Open(saved.path));
  EXPECT_THAT(ExportCheckpoint(*damaged, dir_ + "/damaged.npz", options),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC-32C")));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> entries, ListDirectory(dir_));
  for (const std::string& name : entries) {
    EXPECT_THAT(name, ::testing::Not(HasSubstr("damaged"))) << "left behind";
  }
}

TEST_F(CheckpointTest, KeepsACompleteCopyOfTheBestCheckpoint) {
  Cluster cluster(2);
  auto manager = Manager(cluster, /*max_to_keep=*/1);
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> none, ReadBest(dir_));
  EXPECT_FALSE(none.has_value());
  cluster.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint first, manager->Save());
  ASSERT_OK(KeepAsBest(dir_, first.path, BestRecord{first.step, 0.5, 1.0}));
  cluster.Step(1.0f);
  ASSERT_OK_AND_ASSIGN(SavedCheckpoint second, manager->Save());
  ASSERT_OK(KeepAsBest(dir_, second.path, BestRecord{second.step, 0.7, 0.8}));
  // Retention removed the originals' older one; the best copy is whole.
  EXPECT_FALSE(PathExists(first.path));
  ASSERT_OK_AND_ASSIGN(std::optional<BestRecord> best, ReadBest(dir_));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->step, second.step);
  EXPECT_DOUBLE_EQ(best->accuracy, 0.7);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> entries,
                       ListDirectory(BestDirectory(dir_)));
  EXPECT_THAT(entries, ElementsAre("checkpoint", "ckpt-2", "eval.json"));
  ASSERT_OK_AND_ASSIGN(std::optional<std::string> latest,
                       LatestCheckpoint(BestDirectory(dir_)));
  ASSERT_TRUE(latest.has_value());
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::Open(*latest));
  EXPECT_THAT(reader->Verify(), IsEmpty());
  Cluster other(3);
  ASSERT_OK(RestoreCheckpoint(*latest, other.configure.optimizer(),
                              *other.client, absl::Seconds(10)));
  EXPECT_EQ(other.Pull(), cluster.Pull());
}

}  // namespace
}  // namespace psflow
