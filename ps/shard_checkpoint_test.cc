#include "ps/shard_checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ConfigureRequest Adam(UpdateMode mode = ASYNC, int workers = 1) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  request.mutable_learning_rate()->set_learning_rate(0.1);
  request.set_mode(mode);
  request.set_num_workers(workers);
  request.set_replicas_to_aggregate(workers);
  return request;
}

// "w" is 2 x 5 (10 elements), "b" has 3 (with `b_averages`, a moving
// average with momentum 0.5).
std::unique_ptr<ParameterServerCore> MakeCore(int64_t chunk_elements,
                                              UpdateMode mode = ASYNC,
                                              int workers = 1,
                                              bool b_averages = false) {
  auto core = std::make_unique<ParameterServerCore>(
      ParameterServerCore::Options{chunk_elements * int64_t{sizeof(float)}});
  EXPECT_OK(core->Configure(Adam(mode, workers)));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* w = create.add_variables();
  w->set_name("w");
  w->add_shape(2);
  w->add_shape(5);
  VariableSpec* b = create.add_variables();
  b->set_name("b");
  b->add_shape(3);
  if (b_averages) {
    b->set_update(VariableSpec::MOVING_AVERAGE);
    b->set_momentum(0.5f);
  }
  EXPECT_OK(core->CreateVariables(create));
  return core;
}

// Pushes gradient g(i) = (i + 1) * scale to every chunk of every variable.
void PushEverywhere(ParameterServerCore& core, float scale, int64_t version = 0,
                    int worker = 0) {
  for (auto [name, n] : {std::pair<std::string, int64_t>{"w", 10}, {"b", 3}}) {
    const int64_t chunk = core.chunk_elements();
    for (int64_t offset = 0; offset < n; offset += chunk) {
      const int64_t count = std::min(chunk, n - offset);
      absl::StatusOr<ChunkRef> ref =
          core.Resolve(kProtocolVersion, name, offset, count);
      ASSERT_OK(ref);
      std::vector<float> g(count);
      for (int64_t i = 0; i < count; ++i) g[i] = (offset + i + 1) * scale;
      PushRequest header;
      header.set_version(version);
      header.set_worker_index(worker);
      ASSERT_OK(core.Push(*ref, header, g));
    }
  }
}

// Every variable's values and slots, as one flat vector per tensor.
std::map<std::string, std::vector<float>> Contents(ParameterServerCore& core) {
  std::map<std::string, std::vector<float>> out;
  absl::StatusOr<std::vector<Variable*>> variables = core.ListVariables();
  EXPECT_OK(variables);
  for (Variable* v : *variables) {
    for (int c = 0; c < v->num_chunks(); ++c) {
      const int64_t begin = c * v->chunk_elements();
      const int64_t size =
          std::min(v->chunk_elements(), v->num_elements() - begin);
      std::vector<float> values(size);
      std::vector<std::vector<float>> slots(v->slot_names().size(),
                                            std::vector<float>(size));
      std::vector<absl::Span<float>> spans;
      for (auto& s : slots) spans.push_back(absl::MakeSpan(s));
      v->Snapshot(c, absl::MakeSpan(values), spans);
      auto& dst = out[v->name()];
      dst.insert(dst.end(), values.begin(), values.end());
      for (size_t s = 0; s < slots.size(); ++s) {
        auto& slot_dst = out[v->name() + "@" + v->slot_names()[s]];
        slot_dst.insert(slot_dst.end(), slots[s].begin(), slots[s].end());
      }
    }
  }
  return out;
}

// Turns a save's slices into a restore onto variables of the same names:
// what the chief does through the checkpoint index.
RestoreShardRequest RestoreFrom(const SaveShardResponse& saved,
                                const std::string& path, int64_t step) {
  RestoreShardRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_global_step(step);
  std::map<std::pair<std::string, std::string>, RestoreTarget*> targets;
  for (const SavedSlice& slice : saved.slices()) {
    RestoreTarget*& target = targets[{slice.variable(), slice.slot()}];
    if (target == nullptr) {
      target = request.add_targets();
      target->set_variable(slice.variable());
      target->set_slot(slice.slot());
    }
    RestoreSource* source = target->add_sources();
    source->set_path(path);
    source->set_file_offset(slice.file_offset());
    source->set_num_elements(slice.num_elements());
    source->set_crc32c(slice.crc32c());
    source->set_slice_begin(slice.element_offset());
  }
  return request;
}

class ShardCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/shard_ckpt_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_OK(RemoveRecursively(dir_));
    ASSERT_OK(MakeDirectories(dir_));
  }
  SaveShardRequest SaveTo(const std::string& name, int64_t sync_step = 0) {
    SaveShardRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_path(dir_ + "/" + name);
    request.set_sync_step(sync_step);
    return request;
  }
  std::string dir_;
};

TEST_F(ShardCheckpointTest, RestoresValuesSlotsAndStepOntoOtherChunkSizes) {
  auto core = MakeCore(4);
  PushEverywhere(*core, 1.0f);
  PushEverywhere(*core, -0.5f);
  absl::StatusOr<SaveShardResponse> saved =
      SaveShard(*core, SaveTo("data"), absl::InfiniteFuture());
  ASSERT_OK(saved);
  // w: chunks of 4, 4, 2; b: 3; each with values, m and v.
  EXPECT_EQ(saved->slices_size(), (3 + 1) * 3);
  EXPECT_EQ(saved->file_bytes(), (10 + 3) * 3 * 4);
  for (const SavedSlice& slice : saved->slices()) EXPECT_EQ(slice.version(), 2);

  auto other = MakeCore(3);  // different chunking, fresh optimizer state
  ASSERT_OK(RestoreShard(*other, RestoreFrom(*saved, dir_ + "/data", 2)));
  EXPECT_EQ(Contents(*other), Contents(*core));
  absl::StatusOr<std::vector<Variable*>> variables = other->ListVariables();
  ASSERT_OK(variables);
  for (Variable* v : *variables) {
    for (int c = 0; c < v->num_chunks(); ++c) EXPECT_EQ(v->Version(c), 2);
  }
  // Training goes on identically from the restored state.
  PushEverywhere(*core, 0.25f);
  PushEverywhere(*other, 0.25f);
  EXPECT_EQ(Contents(*other), Contents(*core));
}

TEST_F(ShardCheckpointTest, MovingAveragesRoundTripTheirValuesWithoutSlots) {
  auto core = MakeCore(4, ASYNC, 1, /*b_averages=*/true);
  PushEverywhere(*core, 1.0f);   // b: 0.5 * 0 + 0.5 * (1, 2, 3)
  PushEverywhere(*core, -0.5f);  // b: 0.5 * b + 0.5 * (-0.5, -1, -1.5) = 0
  absl::StatusOr<SaveShardResponse> saved =
      SaveShard(*core, SaveTo("data"), absl::InfiniteFuture());
  ASSERT_OK(saved);
  // w: 3 chunks of values, m and v; b: its values alone.
  EXPECT_EQ(saved->slices_size(), 3 * 3 + 1);
  for (const SavedSlice& slice : saved->slices()) {
    if (slice.variable() == "b") {
      EXPECT_EQ(slice.slot(), "");
    }
  }
  auto other = MakeCore(3, ASYNC, 1, /*b_averages=*/true);
  ASSERT_OK(RestoreShard(*other, RestoreFrom(*saved, dir_ + "/data", 2)));
  EXPECT_EQ(Contents(*other), Contents(*core));
  // Still a moving average after the restore, and in step with the source.
  PushEverywhere(*core, 0.25f);
  PushEverywhere(*other, 0.25f);
  EXPECT_EQ(Contents(*other), Contents(*core));
  EXPECT_THAT(Contents(*other)["b"],
              ::testing::ElementsAre(0.125f, 0.25f, 0.375f));

  RestoreShardRequest with_slot = RestoreFrom(*saved, dir_ + "/data", 2);
  for (const RestoreTarget& t : with_slot.targets()) {
    if (t.variable() != "b") continue;
    RestoreTarget slot = t;
    slot.set_slot("m");
    *with_slot.add_targets() = slot;
    break;
  }
  EXPECT_THAT(RestoreShard(*other, with_slot),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a moving-average variable")));
}

TEST_F(ShardCheckpointTest, NeverOverwritesAFile) {
  auto core = MakeCore(4);
  ASSERT_OK(SaveShard(*core, SaveTo("data"), absl::InfiniteFuture()));
  EXPECT_THAT(SaveShard(*core, SaveTo("data"), absl::InfiniteFuture()),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("data")));
  SaveShardRequest relative = SaveTo("x");
  relative.set_path("relative/data");
  EXPECT_THAT(
      SaveShard(*core, relative, absl::InfiniteFuture()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("absolute")));
}

TEST_F(ShardCheckpointTest, DamagedOrTruncatedDataIsRefusedAndChangesNothing) {
  auto core = MakeCore(4);
  PushEverywhere(*core, 1.0f);
  absl::StatusOr<SaveShardResponse> saved =
      SaveShard(*core, SaveTo("data"), absl::InfiniteFuture());
  ASSERT_OK(saved);
  const std::string path = dir_ + "/data";
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  ASSERT_OK(bytes);

  auto fresh = MakeCore(4);
  PushEverywhere(*fresh, 3.0f);
  const auto before = Contents(*fresh);

  // One flipped bit in the last slice: everything before it reads fine.
  std::string flipped = *bytes;
  flipped[flipped.size() - 2] ^= 0x10;
  ASSERT_OK(RemoveRecursively(path));
  ASSERT_OK(WriteFileAtomically(path, flipped));
  EXPECT_THAT(RestoreShard(*fresh, RestoreFrom(*saved, path, 1)),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(path), HasSubstr("CRC-32C"),
                             HasSubstr("restore another one"))));
  EXPECT_EQ(Contents(*fresh), before);

  ASSERT_OK(RemoveRecursively(path));
  ASSERT_OK(WriteFileAtomically(path, bytes->substr(0, bytes->size() - 5)));
  EXPECT_THAT(RestoreShard(*fresh, RestoreFrom(*saved, path, 1)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  EXPECT_EQ(Contents(*fresh), before);

  ASSERT_OK(RemoveRecursively(path));
  EXPECT_THAT(RestoreShard(*fresh, RestoreFrom(*saved, path, 1)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("missing")));
  EXPECT_EQ(Contents(*fresh), before);
}

TEST_F(ShardCheckpointTest, RestoreRejectsRequestsThatDoNotCoverEverything) {
  auto core = MakeCore(4);
  absl::StatusOr<SaveShardResponse> saved =
      SaveShard(*core, SaveTo("data"), absl::InfiniteFuture());
  ASSERT_OK(saved);
  const RestoreShardRequest good = RestoreFrom(*saved, dir_ + "/data", 0);

  RestoreShardRequest gap = good;
  gap.mutable_targets(0)->mutable_sources()->RemoveLast();
  EXPECT_THAT(RestoreShard(*core, gap),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cover")));

  RestoreShardRequest overlap = good;
  *overlap.mutable_targets(0)->add_sources() = good.targets(0).sources(0);
  EXPECT_THAT(
      RestoreShard(*core, overlap),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));

  // Untrusted sizes: a slice beyond any variable, and one larger than its
  // file (4 GiB of "values" in a file of a few bytes), are refused before
  // anything is allocated for them.
  RestoreShardRequest huge = good;
  huge.mutable_targets(0)->mutable_sources(0)->set_num_elements(int64_t{1}
                                                                << 50);
  EXPECT_THAT(RestoreShard(*core, huge),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("beyond any variable's size")));
  RestoreShardRequest larger_than_file = good;
  RestoreTarget* target = larger_than_file.mutable_targets(0);
  RestoreSource one = target->sources(0);
  one.set_slice_begin(0);
  one.set_num_elements(int64_t{1} << 30);
  target->clear_sources();
  *target->add_sources() = one;
  EXPECT_THAT(RestoreShard(*core, larger_than_file),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("truncated or not this checkpoint's")));

  RestoreShardRequest unknown = good;
  unknown.mutable_targets(0)->set_variable("nope");
  EXPECT_THAT(RestoreShard(*core, unknown),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));

  RestoreShardRequest bad_slot = good;
  bad_slot.mutable_targets(1)->set_slot("momentum");
  EXPECT_THAT(
      RestoreShard(*core, bad_slot),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("momentum")));

  // Values are required; slots are optional (reset to initial values).
  RestoreShardRequest values_only;
  values_only.set_protocol_version(kProtocolVersion);
  for (const RestoreTarget& t : good.targets()) {
    if (t.slot().empty()) *values_only.add_targets() = t;
  }
  EXPECT_OK(RestoreShard(*core, values_only));
  RestoreShardRequest missing = values_only;
  missing.mutable_targets()->RemoveLast();
  EXPECT_THAT(RestoreShard(*core, missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("leaves variable")));
}

// Two sync workers; the chief holds updates at step 1 and saves it while
// the workers' gradients for step 1 arrive.
TEST_F(ShardCheckpointTest, SyncSaveHoldsEveryChunkAtOneStep) {
  auto core = MakeCore(4, SYNC, 2);
  HoldRequest freeze;
  freeze.set_protocol_version(kProtocolVersion);
  freeze.set_action(HoldRequest::FREEZE);
  absl::StatusOr<HoldResponse> frozen = core->Hold(freeze);
  ASSERT_OK(frozen);
  EXPECT_EQ(frozen->max_version(), 0);
  HoldRequest hold_at = freeze;
  hold_at.set_action(HoldRequest::HOLD_AT);
  hold_at.set_step(1);
  ASSERT_OK(core->Hold(hold_at));

  absl::StatusOr<SaveShardResponse> saved;
  std::thread saver([&] {
    saved =
        SaveShard(*core, SaveTo("data", 1), absl::Now() + absl::Seconds(30));
  });
  // Step 0 completes (both workers), then both push step 1: held.
  PushEverywhere(*core, 1.0f, 0, 0);
  PushEverywhere(*core, 1.0f, 0, 1);
  PushEverywhere(*core, 2.0f, 1, 0);
  PushEverywhere(*core, 2.0f, 1, 1);
  saver.join();
  ASSERT_OK(saved);
  for (const SavedSlice& slice : saved->slices()) EXPECT_EQ(slice.version(), 1);
  const auto at_step_1 = Contents(*core);

  // A hold below a chunk's step is refused; release applies step 1.
  hold_at.set_step(0);
  EXPECT_THAT(core->Hold(hold_at),
              StatusIs(absl::StatusCode::kInvalidArgument));
  HoldRequest release = freeze;
  release.set_action(HoldRequest::RELEASE);
  absl::StatusOr<HoldResponse> released = core->Hold(release);
  ASSERT_OK(released);
  EXPECT_EQ(released->min_version(), 2);
  EXPECT_NE(Contents(*core), at_step_1);

  auto restored = MakeCore(4, SYNC, 2);
  ASSERT_OK(RestoreShard(*restored, RestoreFrom(*saved, dir_ + "/data", 1)));
  EXPECT_EQ(Contents(*restored), at_step_1);
}

TEST_F(ShardCheckpointTest, SyncSaveGivesUpAtItsDeadline) {
  auto core = MakeCore(4, SYNC, 2);
  EXPECT_THAT(
      SaveShard(*core, SaveTo("data", 3),
                absl::Now() + absl::Milliseconds(200)),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("step 3")));
  EXPECT_FALSE(PathExists(dir_ + "/data"));
  EXPECT_THAT(
      SaveShard(*core, SaveTo("data", 3), absl::InfiniteFuture(),
                [] { return true; }),
      StatusIs(absl::StatusCode::kCancelled, HasSubstr("shutting down")));
}

}  // namespace
}  // namespace psflow
