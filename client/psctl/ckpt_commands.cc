#include "client/psctl/ckpt_commands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "checkpoint/export.h"
#include "checkpoint/paths.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "client/grpc_coordinator_client.h"
#include "client/psctl/checkpoint_model.h"
#include "client/psctl/export_target.h"
#include "client/psctl/onnx_checkpoint_export.h"
#include "client/psctl/tls_flags.h"
#include "common/file_util.h"
#include "common/tf_config_loader.h"
#include "proto/ps.pb.h"

namespace psflow {
namespace {

int64_t Elements(const CheckpointTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

std::string Shape(const CheckpointTensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.shape(), ", "), "]");
}

std::string Megabytes(int64_t bytes) {
  return absl::StrFormat("%.2f MB", bytes / 1e6);
}

}  // namespace

int CkptList(const std::string& dir, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<std::string>> entries = ListDirectory(dir);
  if (!entries.ok()) {
    err << "psctl ckpt list: " << entries.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (!state.ok() && !absl::IsNotFound(state.status())) {
    err << "psctl ckpt list: " << state.status().message() << "\n";
  }
  std::vector<std::pair<int64_t, std::string>> checkpoints;
  std::vector<std::string> leftovers;
  for (const std::string& name : *entries) {
    if (std::optional<int64_t> step = ParseCheckpointName(name)) {
      checkpoints.emplace_back(*step, name);
    } else if (IsTemporaryCheckpointName(name)) {
      leftovers.push_back(name);
    }
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  if (checkpoints.empty()) out << "no checkpoints in " << dir << "\n";
  for (const auto& [step, name] : checkpoints) {
    std::string listed = "not in the state file";
    if (state.ok()) {
      const auto& paths = state->all_model_checkpoint_paths();
      if (std::find(paths.begin(), paths.end(), name) != paths.end()) {
        listed = state->model_checkpoint_path() == name ? "newest" : "kept";
      }
    }
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::Open(JoinPath(dir, name));
    if (!reader.ok()) {
      out << absl::StrFormat("%-16s step %-10d INCOMPLETE OR DAMAGED: %s\n",
                             name, step, reader.status().message());
      continue;
    }
    const CheckpointIndex& index = (*reader)->index();
    int64_t bytes = 0;
    for (const CheckpointFile& f : index.files()) bytes += f.size();
    out << absl::StrFormat(
        "%-16s step %-10d %s, %d tensors%s on %d ps, %s, %s, written %s  "
        "(%s)\n",
        name, index.global_step(), UpdateMode_Name(index.mode()),
        index.tensors_size(),
        index.tables_size() == 0
            ? ""
            : absl::StrCat(" and ", index.tables_size(), " embedding tables"),
        index.num_ps(), Megabytes(bytes),
        index.job_name().empty() ? "unnamed job" : index.job_name(),
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                         absl::FromUnixMicros(index.created_unix_micros()),
                         absl::UTCTimeZone()),
        listed);
  }
  for (const std::string& name : leftovers) {
    out << name
        << "  (an unfinished save; never read, removed by the next "
           "chief on this directory)\n";
  }
  return 0;
}

// What --values prints at most, per tensor or table.
constexpr int64_t kMaxPrintedValues = 1000000;

int CkptInspect(const std::string& path, const std::string& tensor, bool values,
                std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) {
    err << "psctl ckpt inspect: " << reader.status().message() << "\n";
    return 1;
  }
  const CheckpointIndex& index = (*reader)->index();
  if (tensor.empty()) {
    out << absl::StrFormat(
        "%s: step %d (%s; slice versions %d..%d), %d data files from %d ps, "
        "optimizer %s\n",
        path, index.global_step(), UpdateMode_Name(index.mode()),
        index.min_version(), index.max_version(), index.files_size(),
        index.num_ps(), OptimizerConfig::Kind_Name(index.optimizer().kind()));
  }
  bool found = false;
  for (const CheckpointTensor& t : index.tensors()) {
    if (!tensor.empty() && TensorDisplayName(t) != tensor) continue;
    found = true;
    out << absl::StrFormat("%-32s %-8s %-14s %10d elements %10s  %d slices\n",
                           TensorDisplayName(t), t.dtype(), Shape(t),
                           Elements(t), Megabytes(Elements(t) * 4),
                           t.slices_size());
    if (values) {
      // Printed piece by piece as read (a tensor of any size, its index
      // only a claim, in bounded memory), and at most kMaxPrintedValues:
      // a whole large tensor is for export.
      out << "  [";
      int64_t printed = 0;
      absl::Status read =
          (*reader)->ReadPieces(t, [&](absl::Span<const float> piece) {
            for (float v : piece) {
              if (printed == kMaxPrintedValues) {
                return absl::OutOfRangeError("enough printed");
              }
              out << (printed == 0 ? "" : ", ") << v;
              ++printed;
            }
            return absl::OkStatus();
          });
      if (absl::IsOutOfRange(read)) {
        out << ", ... (" << Elements(t) - printed
            << " more; psctl ckpt export writes them all)";
        read = absl::OkStatus();
      }
      out << "]\n";
      if (!read.ok()) {
        err << "psctl ckpt inspect: " << read.message() << "\n";
        return 1;
      }
    }
  }
  for (const CheckpointTable& t : index.tables()) {
    if (!tensor.empty() && t.name() != tensor) continue;
    found = true;
    const int64_t row_bytes = 24 + int64_t{4} * t.dim() * (1 + t.slots_size());
    out << absl::StrFormat(
        "%-32s table    dim %-10d %10d rows     %10s  %d segments, slots "
        "[%s], versions %d..%d\n",
        t.name(), t.dim(), t.num_rows(), Megabytes(t.num_rows() * row_bytes),
        t.segments_size(), absl::StrJoin(t.slots(), ", "), t.min_version(),
        t.max_version());
    if (values) {
      // Rows as "id: [values]", in the checkpoint's order, at most
      // kMaxPrintedValues values' worth.
      int64_t printed = 0;
      absl::Status read = (*reader)->ReadTable(
          t, [&](const CheckpointReader::RowSegment& segment) {
            for (int64_t r = 0; r < segment.num_rows; ++r) {
              if (printed >= kMaxPrintedValues) {
                return absl::OutOfRangeError("enough printed");
              }
              printed += std::max(1, t.dim());
              out << "  " << segment.ids[r] << ": ["
                  << absl::StrJoin(segment.values.subspan(r * t.dim(), t.dim()),
                                   ", ")
                  << "]\n";
            }
            return absl::OkStatus();
          });
      if (absl::IsOutOfRange(read)) {
        out << "  ... (more rows; psctl ckpt export writes them all)\n";
        read = absl::OkStatus();
      }
      if (!read.ok()) {
        err << "psctl ckpt inspect: " << read.message() << "\n";
        return 1;
      }
    }
  }
  if (!found) {
    err << "psctl ckpt inspect: no tensor or table \"" << tensor << "\" in "
        << path
        << " (names are listed without --tensor; slots are name@slot)\n";
    return 1;
  }
  return 0;
}

int CkptVerify(const std::string& path, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) {
    err << "psctl ckpt verify: " << reader.status().message() << "\n";
    return 1;
  }
  int64_t bytes = 0;
  for (const CheckpointFile& f : (*reader)->index().files()) bytes += f.size();
  const absl::Time start = absl::Now();
  std::vector<std::string> problems = (*reader)->Verify();
  for (const std::string& p : problems) err << "DAMAGED: " << p << "\n";
  if (!problems.empty()) {
    err << "psctl ckpt verify: " << path << " is damaged (" << problems.size()
        << " tensors or tables); restore another checkpoint\n";
    return 1;
  }
  out << absl::StrFormat(
      "%s: OK, %d tensors%s, %s checked in %.2f s\n", path,
      (*reader)->index().tensors_size(),
      (*reader)->index().tables_size() == 0
          ? ""
          : absl::StrCat(" and ", (*reader)->index().tables_size(),
                         " embedding tables"),
      Megabytes(bytes), absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

int CkptExport(const std::string& path, const std::string& format,
               const std::string& out_path, bool include_slots, bool overwrite,
               const std::string& job_path, std::ostream& out,
               std::ostream& err) {
  const bool onnx = format == "onnx";
  ExportOptions options;
  if (!onnx) {
    absl::StatusOr<ExportFormat> parsed = ParseExportFormat(format);
    if (!parsed.ok()) {
      err << "psctl ckpt export: --format=" << format
          << " is not an export format; use safetensors, npz or onnx\n";
      return 1;
    }
    options.format = *parsed;
  } else if (include_slots) {
    err << "psctl ckpt export: --include_slots does not apply to "
           "--format=onnx (an ONNX model holds no optimizer state); export "
           "the slots with --format=safetensors\n";
    return 1;
  }
  if (out_path.empty()) {
    err << "psctl ckpt export: --out=<file> is required\n";
    return 1;
  }
  if (absl::Status target = CheckExportTarget(path, out_path, overwrite);
      !target.ok()) {
    err << "psctl ckpt export: " << target.message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) {
    err << "psctl ckpt export: " << reader.status().message() << "\n";
    return 1;
  }
  // The architecture: recorded in the checkpoint, or from --job.
  absl::StatusOr<CheckpointModelInfo> model =
      ResolveCheckpointModel((*reader)->index(), job_path);
  if (!model.ok() && (onnx || !job_path.empty())) {
    err << "psctl ckpt export: " << model.status().message() << "\n";
    return 1;
  }
  if (model.ok()) {
    options.metadata = ExportMetadata(*model);
  } else {
    err << "psctl ckpt export: note: " << model.status().message()
        << " to name the architecture in the export's metadata\n";
  }
  options.metadata["job_name"] = (*reader)->index().job_name();
  if (onnx) {
    absl::StatusOr<std::string> written =
        ExportOnnx(**reader, *model, options.metadata, out_path);
    if (!written.ok()) {
      err << "psctl ckpt export: " << written.status().message() << "\n";
      return 1;
    }
    out << "wrote the ONNX model of " << path << " (model from "
        << model->source << ") to " << out_path << ": " << *written << "\n";
    return 0;
  }
  options.include_slots = include_slots;
  absl::StatusOr<int> written = ExportCheckpoint(**reader, out_path, options);
  if (!written.ok()) {
    err << "psctl ckpt export: " << written.status().message() << "\n";
    return 1;
  }
  out << "wrote " << *written << " tensors of " << path << " to " << out_path
      << " (" << format << ")\n";
  return 0;
}

int CkptRestore(const std::string& path, const std::string& tf_config_flag,
                const SecuritySettings& tls, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<LoadedTfConfig> loaded =
      LoadTfConfigFromFlagOrEnvironment(tf_config_flag);
  if (!loaded.ok()) {
    err << "psctl ckpt restore: " << loaded.status().message() << "\n";
    return 1;
  }
  const TfConfig& tf = loaded->config;
  const TaskId chief = tf.ChiefTask();
  absl::StatusOr<std::string> chief_found = tf.ChiefAddress();
  if (!chief_found.ok()) {
    err << "psctl ckpt restore: " << chief_found.status().message() << "\n";
    return 1;
  }
  const std::string address = *std::move(chief_found);
  std::string found;
  const SecuritySettings settings =
      WithCredentialsBeside(tls, tf_config_flag, &found);
  if (!found.empty()) {
    err << "psctl ckpt restore: using the job's credentials beside "
        << tf_config_flag << ": " << found << "\n";
  }
  absl::StatusOr<TransportSecurity> security =
      PsctlTransportSecurity(settings, tf.rpc_layer);
  if (!security.ok()) {
    err << "psctl ckpt restore: " << security.status().message() << "\n";
    return 2;
  }
  // Check it here first: a damaged checkpoint is refused before the
  // cluster pauses. The chief and servers read the same absolute path.
  const std::string absolute = AbsolutePath(path);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(absolute);
  if (!reader.ok()) {
    err << "psctl ckpt restore: " << reader.status().message() << "\n";
    return 1;
  }
  // psctl speaks to the chief as the job's tasks do.
  GrpcCoordinatorClient client(address,
                               absl::StrCat(chief.ToString(), " at ", address),
                               *security, std::nullopt, chief.ToString());
  absl::StatusOr<int64_t> step =
      client.RestoreCheckpoint(absolute, absl::Minutes(15));
  if (!step.ok()) {
    err << "psctl ckpt restore: " << step.status().message() << "\n";
    return 1;
  }
  out << "restored " << absolute << "; training resumed at global step "
      << *step << "\n";
  return 0;
}

namespace {

class CkptListCommand : public Subcommand {
 public:
  CkptListCommand()
      : Subcommand("ckpt list", {"<dir>"}, "psctl ckpt list <dir>",
                   "The checkpoints of a directory, newest and kept ones "
                   "marked.") {}

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    return CkptList(arguments[0], out, err);
  }
};

class CkptInspectCommand : public Subcommand {
 public:
  CkptInspectCommand()
      : Subcommand("ckpt inspect", {"<dir>/ckpt-<step>"},
                   "psctl ckpt inspect <dir>/ckpt-<step> "
                   "[--tensor=name[@slot]] [--values]",
                   "Tensors, shapes, dtypes and sizes; values on request.") {
    mutable_flags().AddString("tensor", &tensor_,
                              "only this tensor (name, or name@slot for an "
                              "optimizer slot)");
    mutable_flags().AddBool(
        "values", &values_,
        "print the tensor's values (at most 1000000; export for more)");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    return CkptInspect(arguments[0], tensor_, values_, out, err);
  }

 private:
  std::string tensor_;
  bool values_ = false;
};

class CkptVerifyCommand : public Subcommand {
 public:
  CkptVerifyCommand()
      : Subcommand("ckpt verify", {"<dir>/ckpt-<step>"},
                   "psctl ckpt verify <dir>/ckpt-<step>",
                   "Check every CRC; exit 1 naming each damaged tensor and "
                   "file.") {}

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    return CkptVerify(arguments[0], out, err);
  }
};

class CkptExportCommand : public Subcommand {
 public:
  CkptExportCommand()
      : Subcommand("ckpt export", {"<dir>/ckpt-<step>"},
                   "psctl ckpt export <dir>/ckpt-<step> "
                   "--format=safetensors|npz|onnx --out=<file>\n"
                   "            [--include_slots] [--job=<config.json>] "
                   "[--overwrite]",
                   "Write the model for other tools: its values "
                   "(safetensors, npz;\n"
                   "the metadata name the architecture and layouts), or the "
                   "model itself\n"
                   "(onnx: the graph, values, tables and input "
                   "preprocessing).") {
    mutable_flags().AddString("format", &format_, "safetensors, npz or onnx");
    mutable_flags().AddString("out", &out_path_, "the file to write");
    mutable_flags().AddBool("overwrite", &overwrite_,
                            "replace the --out file when it exists");
    mutable_flags().AddBool("include_slots", &include_slots_,
                            "also the optimizer slots, as name@slot "
                            "(safetensors and npz)");
    mutable_flags().AddString(
        "job", &job_path_,
        "the job config whose model the checkpoint holds; needed for "
        "checkpoints that do not record their model (written before they "
        "did), and used instead of the record when given");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    return CkptExport(arguments[0], format_, out_path_, include_slots_,
                      overwrite_, job_path_, out, err);
  }

 private:
  std::string format_ = "safetensors";
  std::string out_path_;
  bool include_slots_ = false;
  bool overwrite_ = false;
  std::string job_path_;
};

class CkptRestoreCommand : public Subcommand {
 public:
  CkptRestoreCommand()
      : Subcommand(
            "ckpt restore", {"<dir>/ckpt-<step>"},
            "psctl ckpt restore <dir>/ckpt-<step> [--tf_config=<file or JSON>]",
            "Restore into the running job whose TF_CONFIG is given: the chief\n"
            "pauses the workers, restores, and training resumes from there.") {
    mutable_flags().AddString(
        "tf_config", &tf_config_,
        "the running job's TF_CONFIG (any task's) as inline JSON or a path to "
        "a JSON file; defaults to the TF_CONFIG environment variable");
    AddTlsFlags(mutable_flags(), &tls_);
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    return CkptRestore(arguments[0], tf_config_, tls_, out, err);
  }

 private:
  std::string tf_config_;
  SecuritySettings tls_;
};

}  // namespace

std::unique_ptr<Subcommand> NewCkptListCommand() {
  return std::make_unique<CkptListCommand>();
}

std::unique_ptr<Subcommand> NewCkptInspectCommand() {
  return std::make_unique<CkptInspectCommand>();
}

std::unique_ptr<Subcommand> NewCkptVerifyCommand() {
  return std::make_unique<CkptVerifyCommand>();
}

std::unique_ptr<Subcommand> NewCkptExportCommand() {
  return std::make_unique<CkptExportCommand>();
}

std::unique_ptr<Subcommand> NewCkptRestoreCommand() {
  return std::make_unique<CkptRestoreCommand>();
}

}  // namespace psflow
