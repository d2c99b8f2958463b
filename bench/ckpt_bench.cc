// ckpt_bench: checkpoint save and restore throughput against the disk's
// sequential write and read speed measured in the same run, same directory.
//
//   bazel build --config=opt //bench:ckpt_bench && bazel-bin/bench/ckpt_bench
//   bazel-bin/bench/ckpt_bench --sizes_mb=64 --ps=1 --repeats=1
//
// Starts real ps_server processes (async, Adam), creates variables holding
// --sizes_mb of values (the big ones split over the servers), gives values
// and both Adam slots non-zero contents, then times
// CheckpointManager::Save and RestoreCheckpoint. A checkpoint holds 3x the
// model's bytes (values, m, v); GB/s = 1e9 bytes of data files per second.
// Each repetition measures the baseline write (a fresh file of the
// checkpoint's size, 4 MiB writes, fdatasync) and the save, in alternating
// order, then the baseline read and the restore, then deletes both files. With
// --drop_cache (the default) both reads start cold: the baseline file and every
// checkpoint data file are evicted from the page cache (posix_fadvise DONTNEED)
// just before. Prints a Markdown report for bench/RESULTS.md.
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/bench_cluster.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/paths.h"
#include "client/ps_client.h"
#include "common/file_util.h"
#include "common/job/placement.h"
#include "common/process_setup.h"
#include "proto/protocol.h"

ABSL_FLAG(std::string, sizes_mb, "64,256",
          "Model sizes in MB (1e6 bytes of values; a checkpoint is 3x)");
ABSL_FLAG(std::string, ps, "1,2", "Numbers of parameter servers");
ABSL_FLAG(int, repeats, 3, "Timed repetitions per measurement (median)");
ABSL_FLAG(std::string, dir, "/tmp/psflow-ckpt-bench",
          "Directory for the checkpoints and the baseline file (emptied of "
          "what this benchmark writes when it ends)");
ABSL_FLAG(bool, drop_cache, true,
          "Evict the files from the page cache before each timed read");
ABSL_FLAG(int64_t, chunk_bytes, 4 << 20, "ps_server --chunk_bytes");
ABSL_FLAG(std::string, ps_server, "",
          "Path of ps_server; default: from this binary's runfiles");

namespace psflow::bench {
namespace {

// Columns of the big embedding and dense variables.
constexpr int64_t kColumns = 256;

struct Row {
  int64_t model_bytes = 0;
  int num_ps = 0;
  int64_t checkpoint_bytes = 0;
  double save = 0, write = 0, restore = 0, read = 0;
  // Page-cache residency just before the timed reads (medians, 0..1).
  double checkpoint_resident = 0, baseline_resident = 0;
};

// An embedding (3/4 of the bytes) and a dense layer (the rest), both split
// over every server, and a small bias that is not.
std::vector<LogicalVariable> Model(int64_t bytes) {
  const int64_t rows = bytes / int64_t{sizeof(float)} / kColumns;
  const int64_t embedding_rows = rows * 3 / 4;
  return {{"embedding", {embedding_rows, kColumns}},
          {"dense/kernel", {rows - embedding_rows, kColumns}},
          {"dense/bias", {kColumns}}};
}

int64_t Elements(const LogicalVariable& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n;
}

absl::Status ForEachDataFile(const std::string& checkpoint,
                             absl::Status (*fn)(const std::string&)) {
  absl::StatusOr<std::vector<std::string>> names = ListDirectory(checkpoint);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (name == kIndexFileName) continue;
    absl::Status s = fn(JoinPath(checkpoint, name));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The checkpoint's data files' page-cache residency, weighted by size.
absl::StatusOr<double> CheckpointResidentFraction(
    const std::string& checkpoint) {
  absl::StatusOr<std::vector<std::string>> names = ListDirectory(checkpoint);
  if (!names.ok()) return names.status();
  double resident = 0, total = 0;
  for (const std::string& name : *names) {
    if (name == kIndexFileName) continue;
    const std::string path = JoinPath(checkpoint, name);
    absl::StatusOr<int64_t> size = FileSize(path);
    absl::StatusOr<double> fraction = PageCacheResidentFraction(path);
    if (!size.ok()) return size.status();
    if (!fraction.ok()) return fraction.status();
    resident += *fraction * *size;
    total += *size;
  }
  return total > 0 ? resident / total : 1.0;
}

absl::StatusOr<Row> Measure(const Cluster& cluster, int64_t model_bytes,
                            const std::string& dir, int repeats) {
  const std::vector<LogicalVariable> model = Model(model_bytes);
  absl::StatusOr<Placement> placement = PlaceVariables(
      model, cluster.num_ps(), /*split_threshold_bytes=*/1 << 20);
  if (!placement.ok()) return placement.status();
  std::unique_ptr<ParameterClient> client = cluster.NewClient(*placement);
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  config.mutable_learning_rate()->set_learning_rate(1e-3);
  config.set_mode(ASYNC);
  if (absl::Status s = client->Configure(config); !s.ok()) return s;
  if (absl::Status s = client->CreateVariables(); !s.ok()) return s;

  // Non-zero values, then gradients so that m and v are non-zero too.
  std::vector<std::vector<float>> values, grads;
  std::vector<ParameterClient::Const> assign, push;
  for (const LogicalVariable& v : model) {
    const int64_t n = Elements(v);
    values.emplace_back(n);
    grads.emplace_back(n);
    for (int64_t i = 0; i < n; ++i) {
      values.back()[i] = 0.01f * static_cast<float>(i % 1000) + 0.5f;
      grads.back()[i] = 1e-3f * static_cast<float>(i % 7 + 1);
    }
    assign.emplace_back(v.name, values.back());
    push.emplace_back(v.name, grads.back());
  }
  if (absl::Status s = client->Assign(assign)->Wait(); !s.ok()) return s;
  values.clear();

  CheckpointManagerOptions options;
  options.directory =
      JoinPath(dir, absl::StrCat("ckpt-", model_bytes / 1000000, "mb-",
                                 cluster.num_ps(), "ps"));
  options.retention.max_to_keep = 0;  // this benchmark deletes them itself
  options.job_name = "ckpt_bench";
  options.optimizer = config.optimizer();
  options.mode = ASYNC;
  (void)RemoveRecursively(options.directory);
  absl::StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(options, client.get());
  if (!manager.ok()) return manager.status();
  const std::string baseline = JoinPath(dir, "sequential-baseline.bin");
  const bool drop = absl::GetFlag(FLAGS_drop_cache);

  Row row;
  row.model_bytes = model_bytes;
  row.num_ps = cluster.num_ps();
  for (const LogicalVariable& v : model) {
    row.checkpoint_bytes += 3 * Elements(v) * int64_t{sizeof(float)};
  }
  std::vector<double> save, write, restore, read, ckpt_resident, base_resident;
  for (int r = 0; r < repeats; ++r) {
    // A new step for every save, as in training.
    if (absl::Status s = client->Push(push)->Wait(); !s.ok()) return s;
    // Alternate which write goes first: on this kind of VM a write that
    // reuses pages freed moments ago runs faster than one that does not.
    absl::StatusOr<double> w;
    if (r % 2 == 0) w = SequentialWriteGBps(baseline, row.checkpoint_bytes);
    const absl::Time save_start = absl::Now();
    absl::StatusOr<SavedCheckpoint> saved = (*manager)->Save();
    const double save_seconds = absl::ToDoubleSeconds(absl::Now() - save_start);
    if (r % 2 == 1) w = SequentialWriteGBps(baseline, row.checkpoint_bytes);
    if (!w.ok()) return w.status();
    write.push_back(*w);
    if (!saved.ok()) return saved.status();
    if (saved->bytes != row.checkpoint_bytes) {
      return absl::InternalError(absl::StrCat(
          "the checkpoint has ", saved->bytes, " bytes of data files; ",
          row.checkpoint_bytes, " were expected (values, m, v)"));
    }
    save.push_back(saved->bytes / save_seconds / 1e9);

    if (drop) {
      if (absl::Status s = DropFromPageCache(baseline); !s.ok()) return s;
    }
    absl::StatusOr<double> resident = PageCacheResidentFraction(baseline);
    if (!resident.ok()) return resident.status();
    base_resident.push_back(*resident);
    absl::StatusOr<double> rd = SequentialReadGBps(baseline);
    if (!rd.ok()) return rd.status();
    read.push_back(*rd);

    if (drop) {
      absl::Status s = ForEachDataFile(saved->path, DropFromPageCache);
      if (!s.ok()) return s;
    }
    resident = CheckpointResidentFraction(saved->path);
    if (!resident.ok()) return resident.status();
    ckpt_resident.push_back(*resident);
    const absl::Time start = absl::Now();
    absl::StatusOr<int64_t> step = RestoreCheckpoint(
        saved->path, config.optimizer(), *client, absl::Minutes(10));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (!step.ok()) return step.status();
    if (*step != saved->step) {
      return absl::InternalError(
          absl::StrCat("restored step ", *step, " but saved ", saved->step));
    }
    restore.push_back(saved->bytes / seconds / 1e9);
    // Outside the timings, and alike for both: frees the disk space and
    // page cache of both files before the next repetition.
    if (absl::Status s = RemoveRecursively(saved->path); !s.ok()) return s;
    if (absl::Status s = RemoveRecursively(baseline); !s.ok()) return s;
  }
  (void)RemoveRecursively(options.directory);
  row.save = Median(save);
  row.write = Median(write);
  row.restore = Median(restore);
  row.read = Median(read);
  row.checkpoint_resident = Median(ckpt_resident);
  row.baseline_resident = Median(base_resident);
  return row;
}

absl::StatusOr<std::vector<int64_t>> ParseList(const std::string& flag,
                                               const std::string& value) {
  std::vector<int64_t> out;
  for (absl::string_view s : absl::StrSplit(value, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(s, &v) || v <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", s,
                       "\" is not a positive number; e.g. --", flag, "=1,2"));
    }
    out.push_back(v);
  }
  return out;
}

std::string FilesystemType(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0) return "unknown";
  switch (fs.f_type) {
    case 0xEF53:
      return "ext2/3/4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794c7630:
      return "overlayfs";
    default:
      return absl::StrCat("f_type 0x", absl::Hex(fs.f_type));
  }
}

int Main(int argc, char** argv) {
  SetUpProcessForBulkTransfers();
  absl::ParseCommandLine(argc, argv);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  absl::StatusOr<std::vector<int64_t>> sizes =
      ParseList("sizes_mb", absl::GetFlag(FLAGS_sizes_mb));
  absl::StatusOr<std::vector<int64_t>> ps_counts =
      ParseList("ps", absl::GetFlag(FLAGS_ps));
  for (const absl::Status& s : {sizes.status(), ps_counts.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  const std::string dir = AbsolutePath(absl::GetFlag(FLAGS_dir));
  if (absl::Status s = MakeDirectories(dir); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const std::string logs = JoinPath(dir, "logs");
  (void)RemoveRecursively(logs);
  (void)MakeDirectories(logs);
  const std::string binary =
      PsServerPath(absl::GetFlag(FLAGS_ps_server), argv[0]);
  Cluster::Options cluster_options;
  cluster_options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  cluster_options.checkpoint_root = dir;

  std::printf("## ckpt_bench\n\n");
  std::printf("- machine: %s, %ld cores\n", CpuModel().c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("- directory: %s (%s)\n", dir.c_str(),
              FilesystemType(dir).c_str());
  std::printf(
      "- async, Adam (checkpoint = values + m + v = 3x the model), chunk "
      "%lld bytes, median of %d\n",
      static_cast<long long>(cluster_options.chunk_bytes), repeats);
  std::printf(
      "- reads: %s\n\n",
      absl::GetFlag(FLAGS_drop_cache)
          ? "cold: baseline file and checkpoint files evicted from the page "
            "cache (posix_fadvise DONTNEED) before each timed read"
          : "warm: whatever the writes left in the page cache");
  std::printf(
      "| model MB | ps | checkpoint MB | save GB/s | write baseline GB/s | "
      "save / write | restore GB/s | read baseline GB/s | restore / read | "
      "cached before read (ckpt / baseline) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::fflush(stdout);
  for (int64_t mb : *sizes) {
    for (int64_t num_ps : *ps_counts) {
      absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(
          binary, static_cast<int>(num_ps), logs, cluster_options);
      if (!cluster.ok()) {
        std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
        return 1;
      }
      absl::StatusOr<Row> r = Measure(**cluster, mb * 1000000, dir, repeats);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      std::printf(
          "| %lld | %d | %.0f | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx | "
          "%.0f%% / %.0f%% |\n",
          static_cast<long long>(mb), r->num_ps, r->checkpoint_bytes / 1e6,
          r->save, r->write, r->save / r->write, r->restore, r->read,
          r->restore / r->read, 100 * r->checkpoint_resident,
          100 * r->baseline_resident);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) { return psflow::bench::Main(argc, argv); }
