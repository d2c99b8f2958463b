// evaluator_predictions: psflow's own prediction for every example of a
// job's held-out set, from one of its checkpoints, through the evaluator's
// code: the test files read by the evaluator's reader (LoadTestData), the
// checkpoint restored onto an in-process parameter server as the chief
// restores one (RestoreCheckpoint), and
//   CRITEO jobs: ScoreCtrOnce, the pass EvaluateCtrOnce scores (a
//     consistent dense snapshot; each batch's rows pulled without creating
//     any; the model's Score). Run twice: on the tables as the job created
//     them (an id no table row holds reads its initializer's row, as in the
//     evaluator: "evaluator") and on the same tables created with a ZEROS
//     initializer (such an id reads zeros, the ONNX export's default row:
//     "zero_rows"). Also counts the test examples holding such ids.
//   IDX jobs: EvaluateCheckpoint (the evaluator's evaluation of a
//     checkpoint) for the report, and each example's class probabilities
//     from the same model and scaling: exp(-loss) of the example labelled
//     c, one example at a time (the Model interface gives a class model's
//     loss, not its probabilities).
// bench/onnx_test_set_check.py compares these with ONNX Runtime's.
//
//   bazel build --config=opt //bench:evaluator_predictions
//   bazel-bin/bench/evaluator_predictions --job=<config.json>
//       --checkpoint=<dir>/ckpt-<step> --out=<dir>
//
// Writes into --out (created): <variant>.f32, float32 little-endian
// probabilities ([examples] for CRITEO, [examples, classes] for IDX);
// CRITEO: unseen.u8, per example how many of its ids no table row holds
// (up to 255); and summary.json: {"kind": "ctr"|"image", "examples", "classes",
// "global_step", "variants": {<variant>: {"auc", "loss", "accuracy"}},
// "unseen_ids", "examples_with_unseen_ids"} (the last two CRITEO only).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/reader.h"
#include "client/local_ps_shard.h"
#include "client/ps_client.h"
#include "common/file_util.h"
#include "common/float_mode.h"
#include "common/job/job_config.h"
#include "common/job/placement.h"
#include "common/status_macros.h"
#include "evaluation/ctr_evaluation.h"
#include "evaluation/image_evaluation.h"
#include "evaluation/model_snapshot.h"
#include "evaluation/test_data.h"
#include "model/device/cpu/blas_kernels.h"
#include "model/device/select_device.h"
#include "model/registry.h"
#include "proto/protocol.h"
#include "ps/ps_core.h"

ABSL_FLAG(std::string, job, "", "the job config the checkpoint was trained by");
ABSL_FLAG(std::string, checkpoint, "", "a ckpt-<step> directory");
ABSL_FLAG(std::string, out, "", "directory for the predictions");

namespace psflow {
namespace {

// The spec the chief hands the evaluator, as far as evaluation reads it:
// the job, the input the checkpoint records (the chief wrote the spec's
// there) and the servers' update rule.
absl::StatusOr<JobSpec> SpecOf(const JobConfig& job,
                               const CheckpointIndex& index) {
  if (!index.has_model()) {
    return absl::FailedPreconditionError(
        "the checkpoint records no model (written before the ONNX export "
        "came); train the job again");
  }
  const CheckpointModel& model = index.model();
  JobSpec spec;
  *spec.mutable_config() = job;
  for (int64_t d : model.example_shape()) spec.add_example_shape(d);
  spec.set_num_classes(model.num_classes());
  spec.set_num_fields(model.num_fields());
  ConfigureRequest& ps = *spec.mutable_ps_config();
  ps.set_protocol_version(kProtocolVersion);
  *ps.mutable_optimizer() = job.optimizer();
  *ps.mutable_learning_rate() = job.learning_rate();
  ps.set_mode(job.training().mode());
  ps.set_num_workers(1);
  ps.set_replicas_to_aggregate(1);
  return spec;
}

// One parameter server in this process holding a checkpoint's values, and
// a client of it. Members in this order: the client (its shard calls the
// core) is destroyed first.
struct RestoredServer {
  std::unique_ptr<ParameterServerCore> core;
  std::unique_ptr<ParameterClient> client;
  int64_t global_step = 0;
};

// The checkpoint restored as the chief restores one (chief/recovery.cc):
// configure, create the variables and `tables`, restore.
absl::StatusOr<RestoredServer> Restore(
    const JobSpec& spec, const ModelDefinition& definition,
    const std::vector<EmbeddingTableSpec>& tables,
    const std::string& checkpoint) {
  ASSIGN_OR_RETURN(
      Placement placement,
      PlaceVariables(LogicalVariables(definition.variables()), 1, 1 << 20));
  for (const ModelTable& t : definition.tables()) {
    placement.tables.push_back({t.name(), t.dim()});
  }
  RestoredServer server;
  server.core =
      std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<LocalPsShard>(server.core.get(), "ps-0"));
  server.client = std::make_unique<ParameterClient>(
      std::move(shards), placement, ParameterClient::Options());
  RETURN_IF_ERROR(server.client->Configure(spec.ps_config()));
  RETURN_IF_ERROR(server.client->CreateVariables());
  RETURN_IF_ERROR(server.client->CreateTables(tables));
  ASSIGN_OR_RETURN(server.global_step,
                   RestoreCheckpoint(checkpoint, spec.config().optimizer(),
                                     *server.client, absl::Minutes(5)));
  return server;
}

absl::Status WriteFloats(const std::string& path,
                         const std::vector<float>& values) {
  return WriteFileAtomically(
      path, absl::string_view(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float)));
}

std::string ReportJson(const EvaluationReport& report) {
  return absl::StrFormat(
      "{\"auc\": %s, \"loss\": %.9g, \"accuracy\": %.9g}",
      report.has_auc() ? absl::StrFormat("%.9g", report.auc()) : "null",
      report.loss(), report.accuracy());
}

// The test ids no row of a table reading their field holds: how many
// distinct ones, and per example how many of its ids (up to 255).
struct Unseen {
  int64_t ids = 0;
  std::vector<uint8_t> per_example;
};

absl::StatusOr<Unseen> CountUnseen(const CheckpointReader& reader,
                                   const ModelDefinition& definition,
                                   const CtrExamples& test) {
  const std::vector<ModelTable>& tables = definition.tables();
  std::vector<std::unordered_set<int64_t>> held(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const CheckpointTable* table = reader.FindTable(tables[t].name());
    if (table == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(reader.path(), " lacks table ", tables[t].name()));
    }
    RETURN_IF_ERROR(
        reader.ReadTable(*table, [&](const CheckpointReader::RowSegment& s) {
          held[t].insert(s.ids.begin(), s.ids.end());
          return absl::OkStatus();
        }));
  }
  std::unordered_set<int64_t> unseen;
  Unseen count;
  count.per_example.resize(test.num_examples);
  for (int64_t i = 0; i < test.num_examples; ++i) {
    int missing = 0;
    for (int f = 0; f < test.num_fields; ++f) {
      const int64_t k = i * test.num_fields + f;
      for (int64_t j = test.offsets[k]; j < test.offsets[k + 1]; ++j) {
        for (size_t t = 0; t < tables.size(); ++t) {
          const std::vector<int>& fields = tables[t].fields;
          const bool reads =
              fields.empty() ||
              std::find(fields.begin(), fields.end(), f) != fields.end();
          if (reads && held[t].count(test.ids[j]) == 0) {
            ++missing;
            unseen.insert(test.ids[j]);
          }
        }
      }
    }
    count.per_example[i] = static_cast<uint8_t>(std::min(missing, 255));
  }
  count.ids = static_cast<int64_t>(unseen.size());
  return count;
}

absl::StatusOr<std::string> CtrPredictions(const JobSpec& spec,
                                           const ModelDefinition& definition,
                                           const CheckpointReader& reader,
                                           const CtrExamples& test,
                                           Device& device,
                                           const std::string& out) {
  std::vector<EmbeddingTableSpec> as_created, zero_rows;
  for (const ModelTable& t : definition.tables()) {
    as_created.push_back(t.spec);
    zero_rows.push_back(t.spec);
    zero_rows.back().mutable_initializer()->set_kind(
        RowInitializerConfig::ZEROS);
  }
  std::vector<std::string> variants;
  int64_t global_step = 0;
  for (const auto& [name, tables] :
       {std::pair{"evaluator", &as_created}, {"zero_rows", &zero_rows}}) {
    ASSIGN_OR_RETURN(RestoredServer server,
                     Restore(spec, definition, *tables, reader.path()));
    ASSIGN_OR_RETURN(CtrScores scores,
                     ScoreCtrOnce(spec, *server.client, device, test));
    ASSIGN_OR_RETURN(EvaluationReport report, CtrReport(scores, test));
    RETURN_IF_ERROR(WriteFloats(absl::StrCat(out, "/", name, ".f32"),
                                scores.probabilities));
    variants.push_back(absl::StrCat("\"", name, "\": ", ReportJson(report)));
    global_step = scores.global_step;
  }
  ASSIGN_OR_RETURN(Unseen unseen, CountUnseen(reader, definition, test));
  RETURN_IF_ERROR(WriteFileAtomically(
      out + "/unseen.u8", absl::string_view(reinterpret_cast<const char*>(
                                                unseen.per_example.data()),
                                            unseen.per_example.size())));
  const int64_t affected =
      test.num_examples -
      std::count(unseen.per_example.begin(), unseen.per_example.end(), 0);
  return absl::StrCat("{\"kind\": \"ctr\", \"examples\": ", test.num_examples,
                      ", \"classes\": 1, \"global_step\": ", global_step,
                      ", \"variants\": {", absl::StrJoin(variants, ", "),
                      "}, \"unseen_ids\": ", unseen.ids,
                      ", \"examples_with_unseen_ids\": ", affected, "}");
}

// Each example's probability of every class, [n, classes]: exp(-loss) of
// the example labelled c, on the model the evaluator evaluates a
// checkpoint with (the values restored, the features scaled as
// EvaluateValues scales them).
absl::StatusOr<std::vector<float>> ClassProbabilities(
    const ModelDefinition& definition, const ModelSnapshot& values,
    Device& device, const Dataset& images) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   definition.Instantiate(&device, 1));
  RETURN_IF_ERROR(model->LoadParameters(std::vector<absl::Span<const float>>(
      values.values.begin(), values.values.end())));
  const int classes = static_cast<int>(definition.input().num_classes);
  const int64_t f = images.num_features;
  const float scale = definition.feature_scale();
  std::vector<float> probabilities(images.num_examples * classes);
  std::vector<float> features(f);
  for (int64_t i = 0; i < images.num_examples; ++i) {
    for (int64_t k = 0; k < f; ++k) {
      features[k] = images.features[i * f + k] * scale;
    }
    for (int32_t c = 0; c < classes; ++c) {
      ASSIGN_OR_RETURN(
          BatchStats stats,
          model->Evaluate({1, features, absl::MakeConstSpan(&c, 1)},
                          absl::Span<int32_t>()));
      probabilities[i * classes + c] =
          static_cast<float>(std::exp(-stats.loss_sum));
    }
  }
  return probabilities;
}

absl::StatusOr<std::string> ImagePredictions(const JobSpec& spec,
                                             const ModelDefinition& definition,
                                             const CheckpointReader& reader,
                                             const Dataset& images,
                                             Device& device,
                                             const std::string& out) {
  ASSIGN_OR_RETURN(EvaluationReport report,
                   EvaluateCheckpoint(spec, reader.path(), device, images));
  ASSIGN_OR_RETURN(RestoredServer server,
                   Restore(spec, definition, {}, reader.path()));
  ASSIGN_OR_RETURN(ModelSnapshot snapshot,
                   PullModelSnapshot(definition, *server.client));
  ASSIGN_OR_RETURN(std::vector<float> probabilities,
                   ClassProbabilities(definition, snapshot, device, images));
  RETURN_IF_ERROR(WriteFloats(out + "/evaluator.f32", probabilities));
  return absl::StrCat(
      "{\"kind\": \"image\", \"examples\": ", images.num_examples,
      ", \"classes\": ", definition.input().num_classes,
      ", \"global_step\": ", report.global_step(),
      ", \"variants\": {\"evaluator\": ", ReportJson(report), "}}");
}

absl::Status Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::GetFlag(FLAGS_job).empty() ||
      absl::GetFlag(FLAGS_checkpoint).empty() || out.empty()) {
    return absl::InvalidArgumentError(
        "usage: evaluator_predictions --job=<config.json> "
        "--checkpoint=<ckpt dir> --out=<dir>");
  }
  ASSIGN_OR_RETURN(JobConfig job, LoadJobConfigFile(absl::GetFlag(FLAGS_job)));
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                   CheckpointReader::Open(absl::GetFlag(FLAGS_checkpoint)));
  ASSIGN_OR_RETURN(JobSpec spec, SpecOf(job, reader->index()));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  ASSIGN_OR_RETURN(TestData test, LoadTestData(spec));
  // The evaluator's device: `--device` defaults to auto, which is the CPU
  // on these machines; one thread, as the evaluator asks.
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, SelectDevice("cpu", 1));
  RETURN_IF_ERROR(MakeDirectories(out));
  std::string summary;
  if (test.ctr) {
    ASSIGN_OR_RETURN(summary, CtrPredictions(spec, *definition, *reader,
                                             test.examples, *device, out));
  } else {
    ASSIGN_OR_RETURN(summary, ImagePredictions(spec, *definition, *reader,
                                               test.images, *device, out));
  }
  RETURN_IF_ERROR(WriteFileAtomically(out + "/summary.json", summary + "\n"));
  std::printf("%s\n", summary.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  // As the evaluator starts: OpenBLAS's fast kernels, flush-to-zero.
  psflow::UseFastBlasKernels(argv);
  psflow::EnableFlushToZero();
  absl::ParseCommandLine(argc, argv);
  absl::Status status = psflow::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "evaluator_predictions: %s\n",
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
