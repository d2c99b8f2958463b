#include "client/psctl/checkpoint_model.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job/job_config.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "data/training_data.h"
#include "google/protobuf/util/json_util.h"
#include "model/registry.h"

namespace psflow {
namespace {

absl::StatusOr<CheckpointModelInfo> FromJob(const std::string& job_path) {
  ASSIGN_OR_RETURN(JobConfig job, LoadJobConfigFile(job_path));
  CheckpointModelInfo model;
  model.config = job.model();
  model.data_format = job.data().format() == DataConfig::CRITEO
                          ? DataConfig::CRITEO
                          : DataConfig::IDX;
  model.source = "--job=" + job_path;
  // CRITEO's shape follows from the config; IDX's from the images' header
  // (and the labels, for the classes), as the chief reads them.
  TrainingData data;
  if (model.data_format == DataConfig::CRITEO) {
    data = CtrTrainingData(job, 0);
  } else {
    absl::StatusOr<TrainingData> described = DescribeTrainingData(job);
    if (!described.ok()) {
      return absl::Status(
          described.status().code(),
          absl::StrCat(job_path,
                       ": the model's input shape comes from the "
                       "job's training data, which cannot be read: ",
                       described.status().message()));
    }
    data = *std::move(described);
  }
  model.input.example_shape = data.example_shape;
  model.input.num_classes = data.num_classes;
  model.input.num_fields = data.num_fields;
  return model;
}

std::string PreprocessingOf(const CheckpointModelInfo& model, float scale) {
  if (model.data_format == DataConfig::CRITEO) {
    return "dense columns: log(1 + max(x, 0)) of the raw integers (a "
           "missing value is 0); categorical values: ids CtrFeatureId(field, "
           "value) = (field << 48) | (SplitMix64Mix(value) & (2^48 - 1)) "
           "(docs/data.md), each field's bag of ids looked up in its table "
           "and pooled";
  }
  if (scale != 1.0f) {
    return absl::StrFormat(
        "raw pixel bytes times %.9g (1/255), flattened row-major, before the "
        "first layer",
        scale);
  }
  return "raw pixel values 0..255 as float32; the model's own Rescaling "
         "layer, if it has one, scales them";
}

}  // namespace

absl::StatusOr<CheckpointModelInfo> ResolveCheckpointModel(
    const CheckpointIndex& index, const std::string& job_path) {
  if (!job_path.empty()) return FromJob(job_path);
  if (!index.has_model() || !index.model().has_config()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint of job \"", index.job_name(),
        "\" does not record its model (it was written before checkpoints "
        "did); pass the job's config with --job=<config.json>"));
  }
  const CheckpointModel& recorded = index.model();
  CheckpointModelInfo model;
  model.config = recorded.config();
  model.data_format = recorded.data_format() == DataConfig::CRITEO
                          ? DataConfig::CRITEO
                          : DataConfig::IDX;
  model.input.example_shape.assign(recorded.example_shape().begin(),
                                   recorded.example_shape().end());
  model.input.num_classes = recorded.num_classes();
  model.input.num_fields = recorded.num_fields();
  model.source = "the checkpoint";
  return model;
}

std::map<std::string, std::string> ExportMetadata(
    const CheckpointModelInfo& model) {
  std::map<std::string, std::string> metadata;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  std::string config;
  if (google::protobuf::util::MessageToJsonString(model.config, &config, print)
          .ok()) {
    metadata["model"] = config;
  }
  float scale = 1.0f;
  if (absl::StatusOr<std::unique_ptr<ModelDefinition>> definition =
          DefineModel(model.config, model.input);
      definition.ok()) {
    scale = (*definition)->feature_scale();
  }
  metadata["input"] = absl::StrCat(
      "{\"data_format\":",
      JsonQuote(model.data_format == DataConfig::CRITEO ? "CRITEO" : "IDX"),
      ",\"example_shape\":[", absl::StrJoin(model.input.example_shape, ","),
      "],\"num_classes\":", model.input.num_classes,
      ",\"num_fields\":", model.input.num_fields,
      ",\"preprocessing\":", JsonQuote(PreprocessingOf(model, scale)), "}");
  metadata["layout"] =
      "float32 little-endian, row-major (C order). Dense kernels are [in, "
      "out]: y = x @ kernel + bias. Conv2D kernels are [kh, kw, in, out] "
      "over NHWC images ([h, w] images are [h, w, 1]). Cross: x @ kernel "
      "([d, d]) or x @ kernel_u @ kernel_v. BatchNormalization per channel "
      "(the last axis), in inference (x - moving_mean) / sqrt("
      "moving_variance + epsilon) * gamma + beta. Embedding tables: "
      "<table>/ids (int64 [rows]) and <table>/values ([rows, dim]) in the "
      "same row order.";
  metadata["model_source"] = model.source;
  return metadata;
}

}  // namespace psflow
