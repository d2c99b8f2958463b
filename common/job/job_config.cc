#include "common/job/job_config.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/job/update_rule.h"
#include "common/json.h"
#include "common/path_name.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "proto/protocol.h"

namespace psflow {

namespace {

// training.epochs at most this (a million passes over the data).
constexpr double kMaxEpochs = 1e6;
// training.worker_memory_mib at most this: 1 PiB, far beyond any host,
// and far below where its bytes overflow an int64.
constexpr int64_t kMaxWorkerMemoryMib = int64_t{1} << 30;

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", problem));
}

// A table's own optimizer and learning-rate schedule, checked
// here so that a bad value fails the job before any server starts.
absl::Status ValidateTableUpdateRule(absl::string_view field,
                                     const EmbeddingTableSpec& table) {
  absl::Status status;
  if (table.has_optimizer()) {
    absl::StatusOr<OptimizerParams> params =
        OptimizerParamsFromProto(table.optimizer());
    status = params.ok() ? ValidateOptimizerParams(*params) : params.status();
  }
  if (status.ok() && table.has_learning_rate()) {
    absl::StatusOr<LrScheduleConfig> schedule =
        LrScheduleFromProto(table.learning_rate());
    status =
        schedule.ok() ? ValidateLrScheduleConfig(*schedule) : schedule.status();
  }
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", status.message()));
}

}  // namespace

void FillJobConfigDefaults(JobConfig& config) {
  if (config.name().empty()) config.set_name("run");
  TrainingConfig& t = *config.mutable_training();
  if (t.split_threshold_bytes() == 0) t.set_split_threshold_bytes(1 << 20);
  if (t.cpu_threads() == 0) t.set_cpu_threads(1);
  LoggingConfig& l = *config.mutable_logging();
  if (l.log_every_steps() == 0) l.set_log_every_steps(100);
  if (l.log_dir().empty()) l.set_log_dir("logs");
  if (l.worker_metrics() == LoggingConfig::WORKER_METRICS_UNSPECIFIED) {
    l.set_worker_metrics(LoggingConfig::ALL_WORKERS);
  }
  EvaluationConfig& e = *config.mutable_evaluation();
  if (e.every_secs() == 0) e.set_every_secs(10);
  if (e.batch_size() == 0) e.set_batch_size(1000);
  CheckpointConfig& c = *config.mutable_checkpoint();
  if (c.save_every_steps() == 0 && c.save_every_secs() == 0) {
    c.set_save_every_secs(600);
  }
  if (c.max_to_keep() == 0) c.set_max_to_keep(5);
}

namespace {

// The job's name and run group become folders.
absl::Status ValidateNames(const JobConfig& config) {
  // The name becomes folders: <log_dir>/<name>/<task>.
  RETURN_IF_ERROR(CheckPathName(config.name(), "name"));
  if (!config.logging().run_group().empty()) {
    // <log_dir>/<run_group>/<name>/<task>.
    RETURN_IF_ERROR(
        CheckPathName(config.logging().run_group(), "logging.run_group"));
  }
  return absl::OkStatus();
}

// A model is named; the optimizer, the schedule and the tables' own
// update rules are valid (the model's fields are the model library's).
absl::Status ValidateModelAndOptimizer(const JobConfig& config) {
  const ModelConfig& model = config.model();
  if (model.kind_case() == ModelConfig::KIND_NOT_SET &&
      model.layers().empty()) {
    return Invalid("model",
                   "is missing; set \"layers\": [...] (Keras-style layers, "
                   "see configs/fashion_mnist_convnet.json), \"mlp\": "
                   "{\"hidden_sizes\": [256]} or \"softmax_regression\": "
                   "{}");
  }
  // The model's own fields are checked by the model library
  // (model/registry.h), which knows every kind.
  ASSIGN_OR_RETURN(OptimizerParams optimizer,
                   OptimizerParamsFromProto(config.optimizer()));
  RETURN_IF_ERROR(ValidateOptimizerParams(optimizer));
  ASSIGN_OR_RETURN(LrScheduleConfig schedule,
                   LrScheduleFromProto(config.learning_rate()));
  RETURN_IF_ERROR(ValidateLrScheduleConfig(schedule));
  if (model.has_wide_deep()) {
    RETURN_IF_ERROR(ValidateTableUpdateRule("model.wide_deep.embedding",
                                            model.wide_deep().embedding()));
    RETURN_IF_ERROR(ValidateTableUpdateRule("model.wide_deep.linear",
                                            model.wide_deep().linear()));
  }
  for (const EmbeddingTableSpec& table : model.graph().tables()) {
    RETURN_IF_ERROR(ValidateTableUpdateRule(
        absl::StrCat("model.graph.tables \"", table.name(), "\""), table));
  }
  return absl::OkStatus();
}

// The data's format suits the model, and names the files it needs.
absl::Status ValidateData(const JobConfig& config) {
  const DataConfig& data = config.data();
  const bool criteo = data.format() == DataConfig::CRITEO;
  if (data.format() != DataConfig::FORMAT_UNSPECIFIED &&
      data.format() != DataConfig::IDX && !criteo) {
    return Invalid("data.format", "is unknown; use IDX or CRITEO");
  }
  const ModelConfig& model = config.model();
  if (criteo && !model.has_wide_deep() && !model.has_graph()) {
    return Invalid("data.format",
                   "is CRITEO, which only model.wide_deep and model.graph "
                   "read");
  }
  if (!criteo && model.has_wide_deep()) {
    return Invalid("data.format",
                   "must be CRITEO for model.wide_deep (it reads bags of ids)");
  }
  if (criteo) {
    if (data.train_path().empty()) {
      return Invalid("data.train_path",
                     "must name a Criteo-format file (plain or gzip)");
    }
    if (data.num_dense() < 0 || data.num_dense() > 4096 ||
        data.num_fields() < 0 || data.num_fields() > 4096) {
      return Invalid("data.num_dense and data.num_fields",
                     "must be 0 (the default: 13 and 26) to 4096");
    }
  } else {
    if (data.train_images().empty() || data.train_labels().empty()) {
      return Invalid("data.train_images and data.train_labels",
                     "must both name IDX files (gzipped or raw)");
    }
    if (data.test_images().empty() != data.test_labels().empty()) {
      return Invalid("data.test_images and data.test_labels",
                     "must be given together (or both left out)");
    }
  }
  // Labels are one byte each in IDX files.
  if (data.num_classes() != 0 &&
      (data.num_classes() < 2 || data.num_classes() > 256)) {
    return Invalid("data.num_classes",
                   absl::StrCat("is ", data.num_classes(),
                                "; use 2..256, or leave it out to count the "
                                "training labels"));
  }
  return absl::OkStatus();
}

// Batch, stopping rule, mode and the mode's own settings, threads.
absl::Status ValidateGradientClipping(const GradientClipping& clipping) {
  const struct {
    const char* field;
    bool set;
    double value;
  } bounds[] = {
      {"training.gradient_clipping.clip_norm", clipping.has_clip_norm(),
       clipping.clip_norm()},
      {"training.gradient_clipping.clip_value", clipping.has_clip_value(),
       clipping.clip_value()},
      {"training.gradient_clipping.global_clip_norm",
       clipping.has_global_clip_norm(), clipping.global_clip_norm()},
  };
  // Workers clip in float, flushing subnormals to zero: a bound far
  // below 1 would turn every gradient into 0 and silently stop training.
  constexpr double kSmallestBound = 1e-12;
  for (const auto& bound : bounds) {
    if (bound.set &&
        !(bound.value >= kSmallestBound && std::isfinite(bound.value))) {
      return Invalid(bound.field,
                     absl::StrCat("is ", bound.value,
                                  "; use a number from 1e-12 up, such as "
                                  "1.0, or leave it out to clip nothing"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTraining(const JobConfig& config) {
  const TrainingConfig& t = config.training();
  if (t.batch_size() <= 0) {
    return Invalid("training.batch_size",
                   absl::StrCat("is ", t.batch_size(),
                                "; use a positive number such as 64"));
  }
  switch (t.stop_case()) {
    case TrainingConfig::kSteps:
      if (t.steps() <= 0) {
        return Invalid("training.steps",
                       absl::StrCat("is ", t.steps(), "; use 1 or more"));
      }
      break;
    case TrainingConfig::kEpochs:
      // Bounded so that epochs x examples stays an exact count of steps.
      if (!(t.epochs() > 0) || !(t.epochs() <= kMaxEpochs)) {
        return Invalid(
            "training.epochs",
            absl::StrCat("is ", t.epochs(), "; use a positive number up to ",
                         kMaxEpochs));
      }
      break;
    default:
      return Invalid("training",
                     "needs \"steps\" or \"epochs\" to know when to stop");
  }
  if (t.mode() != ASYNC && t.mode() != SYNC && t.mode() != BOUNDED) {
    // A number in the JSON is kept as an unnamed value: say the number.
    const std::string name = UpdateMode_Name(t.mode());
    return Invalid(
        "training.mode",
        absl::StrCat("is ", name.empty() ? absl::StrCat(t.mode()) : name,
                     "; use \"ASYNC\", \"SYNC\" or \"BOUNDED\""));
  }
  if (t.staleness_aware_learning_rate() && t.mode() == SYNC) {
    return Invalid("training.staleness_aware_learning_rate",
                   "applies to ASYNC and BOUNDED training only (SYNC "
                   "gradients are never stale); remove it or use \"mode\": "
                   "\"ASYNC\"");
  }
  if (t.parameter_prefetch() != TrainingConfig::AUTO && t.mode() == SYNC) {
    return Invalid("training.parameter_prefetch",
                   "applies to ASYNC and BOUNDED training only (a SYNC "
                   "worker pulls once its step closes); remove it or use "
                   "\"mode\": \"ASYNC\"");
  }
  if (t.has_sync_group_bytes()) {
    if (t.mode() != SYNC) {
      return Invalid("training.sync_group_bytes",
                     "applies to SYNC training only (ASYNC and BOUNDED "
                     "workers push each step's gradients at once); remove it "
                     "or use \"mode\": \"SYNC\"");
    }
    if (t.sync_group_bytes() < 0) {
      return Invalid("training.sync_group_bytes",
                     absl::StrCat("is ", t.sync_group_bytes(),
                                  "; use a number of bytes (262144 by "
                                  "default), or 0 to push once backward "
                                  "ends"));
    }
  }
  if (t.mode() == BOUNDED) {
    if (!t.has_max_staleness()) {
      return Invalid("training.max_staleness",
                     "is needed by \"mode\": \"BOUNDED\": how many steps a "
                     "worker may run ahead of the slowest (e.g. 4; 0 is sync "
                     "without aggregation)");
    }
    if (t.max_staleness() < 0 || t.max_staleness() > kMaxStalenessBound) {
      return Invalid("training.max_staleness",
                     absl::StrCat("is ", t.max_staleness(), "; use 0 to ",
                                  kMaxStalenessBound));
    }
    if (t.replicas_to_aggregate() != 0) {
      return Invalid("training.replicas_to_aggregate",
                     "applies to SYNC training only; BOUNDED applies every "
                     "gradient on arrival. Remove it");
    }
  } else if (t.has_max_staleness()) {
    return Invalid(
        "training.max_staleness",
        absl::StrCat("applies to \"mode\": \"BOUNDED\" only (this "
                     "job is ",
                     UpdateMode_Name(t.mode()), "); remove it or use BOUNDED"));
  }
  if (t.replicas_to_aggregate() < 0) {
    return Invalid("training.replicas_to_aggregate",
                   absl::StrCat("is ", t.replicas_to_aggregate(),
                                "; use 0 (every worker) or a positive count"));
  }
  if (t.split_threshold_bytes() < 0) {
    return Invalid("training.split_threshold_bytes",
                   absl::StrCat("is ", t.split_threshold_bytes(),
                                "; use 0 for the default or a byte count"));
  }
  // Shifted into bytes (model/memory_estimate.cc): a negative value would
  // turn the memory check off, a huge one overflow.
  if (t.worker_memory_mib() < 0 ||
      t.worker_memory_mib() > kMaxWorkerMemoryMib) {
    return Invalid(
        "training.worker_memory_mib",
        absl::StrCat("is ", t.worker_memory_mib(),
                     "; use the MiB each worker may use, up to ",
                     kMaxWorkerMemoryMib,
                     " (1 PiB), or 0 for the memory of the chief's host"));
  }
  if (t.cpu_threads() < 0 || t.cpu_threads() > 256) {
    return Invalid("training.cpu_threads",
                   absl::StrCat("is ", t.cpu_threads(), "; use 1 to 256"));
  }
  return ValidateGradientClipping(t.gradient_clipping());
}

absl::Status ValidateLoggingAndEvaluation(const JobConfig& config) {
  if (config.logging().log_every_steps() < 0) {
    return Invalid("logging.log_every_steps",
                   absl::StrCat("is ", config.logging().log_every_steps(),
                                "; use a positive number"));
  }
  if (config.evaluation().every_secs() < 0 ||
      !std::isfinite(config.evaluation().every_secs())) {
    return Invalid("evaluation.every_secs",
                   absl::StrCat("is ", config.evaluation().every_secs(),
                                "; use a positive number of seconds"));
  }
  if (config.evaluation().batch_size() < 0) {
    return Invalid("evaluation.batch_size",
                   absl::StrCat("is ", config.evaluation().batch_size(),
                                "; use a positive number"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpoints(const JobConfig& config) {
  const CheckpointConfig& c = config.checkpoint();
  if (c.save_every_steps() < 0) {
    return Invalid("checkpoint.save_every_steps",
                   absl::StrCat("is ", c.save_every_steps(),
                                "; use a positive number or 0 (off)"));
  }
  if (c.save_every_secs() < 0 || !std::isfinite(c.save_every_secs())) {
    return Invalid("checkpoint.save_every_secs",
                   absl::StrCat("is ", c.save_every_secs(),
                                "; use a positive number or 0 (off)"));
  }
  if (c.max_to_keep() < -1) {
    return Invalid("checkpoint.max_to_keep",
                   absl::StrCat("is ", c.max_to_keep(),
                                "; use a positive number, or -1 to keep all"));
  }
  if (c.keep_checkpoint_every_n_hours() < 0 ||
      !std::isfinite(c.keep_checkpoint_every_n_hours())) {
    return Invalid("checkpoint.keep_checkpoint_every_n_hours",
                   absl::StrCat("is ", c.keep_checkpoint_every_n_hours(),
                                "; use a positive number or 0 (off)"));
  }
  return absl::OkStatus();
}

// Protobuf's JSON reader takes a field under its proto name or its JSON
// name ("batch_size", "batchSize"; "dense", "Dense") and keeps the last of
// two, so the strict reader's duplicate-key check, which compares the
// keys' text, misses one field given under both. This maps every key of
// `value` (an object read as `message`, named `path`) to its field and
// refuses a field that two keys set, here and in every nested message.
// Unknown keys are left to protobuf's reader, which names them.
absl::Status CheckEachFieldSetOnce(const JsonValue& value,
                                   const google::protobuf::Descriptor& message,
                                   const std::string& path) {
  if (value.kind() != JsonValue::Kind::kObject) return absl::OkStatus();
  // google.protobuf's own types (Struct, Any...) have free-form keys.
  if (message.file()->package() == "google.protobuf") return absl::OkStatus();
  std::map<const google::protobuf::FieldDescriptor*, std::string> first_key;
  for (const auto& [key, member] : value.object()) {
    const google::protobuf::FieldDescriptor* field = nullptr;
    for (int i = 0; i < message.field_count() && field == nullptr; ++i) {
      if (message.field(i)->json_name() == key) field = message.field(i);
    }
    if (field == nullptr) field = message.FindFieldByName(key);
    if (field == nullptr) continue;
    const std::string name =
        path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    if (auto [it, added] = first_key.emplace(field, key); !added) {
      return Invalid(name, absl::StrCat("is set twice, as \"", it->second,
                                        "\" and as \"", key,
                                        "\" (two spellings of one field; "
                                        "the reader would keep only the "
                                        "last); give it once"));
    }
    if (field->cpp_type() !=
        google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;
    }
    const google::protobuf::Descriptor& type = *field->message_type();
    if (field->is_map()) {
      // Map keys are data; only message values have fields.
      const google::protobuf::FieldDescriptor* map_value = type.map_value();
      if (map_value->cpp_type() !=
              google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
          member.kind() != JsonValue::Kind::kObject) {
        continue;
      }
      for (const auto& [map_key, entry] : member.object()) {
        RETURN_IF_ERROR(CheckEachFieldSetOnce(
            entry, *map_value->message_type(),
            absl::StrCat(name, "[", JsonQuote(map_key), "]")));
      }
    } else if (field->is_repeated()) {
      if (member.kind() != JsonValue::Kind::kArray) continue;
      for (size_t i = 0; i < member.array().size(); ++i) {
        RETURN_IF_ERROR(CheckEachFieldSetOnce(member.array()[i], type,
                                              absl::StrCat(name, "[", i, "]")));
      }
    } else {
      RETURN_IF_ERROR(CheckEachFieldSetOnce(member, type, name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobConfig(const JobConfig& config) {
  RETURN_IF_ERROR(ValidateNames(config));
  RETURN_IF_ERROR(ValidateModelAndOptimizer(config));
  RETURN_IF_ERROR(ValidateData(config));
  RETURN_IF_ERROR(ValidateTraining(config));
  RETURN_IF_ERROR(ValidateLoggingAndEvaluation(config));
  return ValidateCheckpoints(config);
}

absl::StatusOr<JobConfig> ParseJobConfig(absl::string_view json,
                                         absl::string_view source) {
  // Protobuf's JSON reader keeps the last of two equal keys; the strict
  // reader (common/json.h), like TF_CONFIG's, refuses them, so a key given
  // twice is a named error instead of a silently dropped setting.
  // A field given under two spellings ("batch_size" and "batchSize") is
  // refused the same way.
  absl::StatusOr<JsonValue> strict = ParseJson(json);
  absl::Status once = strict.status();
  if (once.ok()) {
    once = CheckEachFieldSetOnce(*strict, *JobConfig::descriptor(), "");
  }
  if (!once.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config ", source, ": ", once.message(),
                     " (fields are listed in docs/configuration.md)"));
  }
  JobConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json),
                                                            &config, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config ", source, ": ", parsed.message().as_string(),
                     " (fields are listed in docs/configuration.md)"));
  }
  FillJobConfigDefaults(config);
  absl::Status valid = ValidateJobConfig(config);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("job config ", source, ": ",
                                                   valid.message()));
  }
  return config;
}

absl::StatusOr<JobConfig> LoadJobConfigFile(const std::string& path) {
  // A job config is a page of JSON; anything much larger is not one.
  constexpr int64_t kMaxJobConfigBytes = 1 << 20;
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxJobConfigBytes);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("job config ", path, " cannot be read (",
                     text.status().message(),
                     "); pass an existing JSON file "
                     "(configs/fashion_mnist_mlp.json is the default job)"));
  }
  return ParseJobConfig(*text, path);
}

int ReplicasToAggregate(const JobConfig& config, int num_workers) {
  const int k = config.training().replicas_to_aggregate();
  return k > 0 ? k : num_workers;
}

int64_t TotalGlobalSteps(const JobConfig& config, int64_t train_examples,
                         int num_workers) {
  const TrainingConfig& t = config.training();
  if (t.stop_case() == TrainingConfig::kSteps) return t.steps();
  double batches = t.epochs() * static_cast<double>(train_examples) /
                   std::max(1, t.batch_size());
  if (t.mode() == SYNC)
    batches /= std::max(1, ReplicasToAggregate(config, num_workers));
  // Saturates instead of wrapping (an unvalidated config, or a data set
  // far beyond any real one): 2^62 steps never end anyway.
  constexpr double kMaxSteps = 4.611686018427387904e18;  // 2^62
  if (!(batches < kMaxSteps)) return int64_t{1} << 62;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(batches)));
}

absl::Status CheckBatchFitsShards(const JobConfig& config,
                                  int64_t train_examples, int num_workers) {
  const int64_t smallest = train_examples / std::max(1, num_workers);
  const int batch = config.training().batch_size();
  if (batch <= smallest) return absl::OkStatus();
  if (train_examples <= 0) {
    return absl::FailedPreconditionError(
        "the training data holds no examples, so no worker could take a "
        "step; name a training set with data in it");
  }
  if (batch > train_examples) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training.batch_size is ", batch, " but the whole training set holds ",
        train_examples, " example", train_examples == 1 ? "" : "s",
        ", so no worker could fill a batch; use a batch_size of at most ",
        std::max<int64_t>(1, train_examples / std::max(1, num_workers)),
        " for ", num_workers, " worker", num_workers == 1 ? "" : "s",
        ", or more data"));
  }
  if (smallest == 0) {
    // Some shards are empty: no batch size helps those workers.
    const int64_t at_most =
        std::max<int64_t>(1, train_examples / std::max(1, batch));
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", train_examples, " training example",
        train_examples == 1 ? "" : "s", " are fewer than the ", num_workers,
        " workers, so some workers' shards are empty and they could never "
        "take a step; use at most ",
        at_most, at_most == 1 ? " worker" : " workers",
        " for training.batch_size ", batch, ", or more data"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "training.batch_size is ", batch, " but the ", train_examples,
      " training examples over ", num_workers, " worker",
      num_workers == 1 ? "" : "s", " give shards of as few as ", smallest,
      " examples: such a worker could not fill a batch (an epoch's incomplete "
      "last batch is dropped), so it would never take a step; use a "
      "batch_size of at most ",
      std::max<int64_t>(1, smallest), ", fewer workers, or more data"));
}

std::string MetricsDir(const JobConfig& config, const std::string& logdir_flag,
                       const std::string& task_name) {
  const std::string root =
      logdir_flag.empty() ? config.logging().log_dir() : logdir_flag;
  const std::string& group = config.logging().run_group();
  return absl::StrCat(root, "/", group.empty() ? "" : group + "/",
                      config.name(), "/", task_name);
}

std::string JobConfigSummary(const JobConfig& config) {
  // Any model kind, by reflection: "mlp {hidden_sizes: 256}".
  std::string model = "no model";
  const google::protobuf::Reflection* reflection =
      config.model().GetReflection();
  const google::protobuf::OneofDescriptor* kind =
      config.model().GetDescriptor()->FindOneofByName("kind");
  if (const google::protobuf::FieldDescriptor* field =
          kind == nullptr
              ? nullptr
              : reflection->GetOneofFieldDescriptor(config.model(), kind);
      field != nullptr) {
    model = absl::StrCat(
        field->name(), " {",
        reflection->GetMessage(config.model(), field).ShortDebugString(), "}");
  }
  const TrainingConfig& t = config.training();
  return absl::StrCat(config.name(), ": ", model, ", ",
                      OptimizerConfig::Kind_Name(config.optimizer().kind()),
                      " lr ", config.learning_rate().learning_rate(),
                      ", batch ", t.batch_size(), ", ",
                      t.stop_case() == TrainingConfig::kSteps
                          ? absl::StrCat(t.steps(), " steps")
                          : absl::StrCat(t.epochs(), " epochs"),
                      ", ", UpdateMode_Name(t.mode()));
}

bool HasTestData(const JobConfig& config) {
  const DataConfig& data = config.data();
  return data.format() == DataConfig::CRITEO ? !data.test_path().empty()
                                             : !data.test_images().empty();
}

}  // namespace psflow
