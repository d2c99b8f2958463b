#include "worker/training_job.h"

#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cluster_client.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/batch_stream.h"
#include "data/criteo.h"
#include "data/dataset.h"
#include "data/training_data.h"
#include "model/registry.h"
#include "worker/keep_alive.h"

namespace psflow {

namespace {

// What the worker returns when the keep-alive heard the job end while it
// prepared (nothing is left to train), or nullopt while the job runs: OK
// for a job that succeeded without it, Aborted with the chief's message
// for a failed one.
std::optional<absl::Status> EndedWhilePreparing(const KeepAlive& keep_alive) {
  std::optional<StatusResponse> ended = keep_alive.JobEnded();
  if (!ended.has_value()) return std::nullopt;
  if (ended->state() == SUCCEEDED) {
    LOG(INFO) << "the job finished while this worker prepared; nothing to do";
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat("the job failed: ", ended->message()));
}

}  // namespace

absl::Status RunTrainingJob(const TrainingJobOptions& options) {
  const JobSpec& spec = options.spec;
  const JobConfig& job = spec.config();
  const int index = options.tf_config.task.index;
  const int num_workers = spec.num_workers();
  // Before the data is read: a worker given another cluster than the
  // chief's would push to the wrong servers.
  RETURN_IF_ERROR(CheckSameCluster(options.tf_config, spec));
  // From here on the chief hears from this worker about once an interval,
  // however long loading the data takes.
  KeepAlive keep_alive(options.coordinator,
                       PreparingReport(index, options.incarnation),
                       options.heartbeat_interval, options.clock);

  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  BatchStream::Options stream_options;
  stream_options.batch_size = job.training().batch_size();
  stream_options.seed = job.training().seed();
  stream_options.feature_scale = definition->feature_scale();
  std::unique_ptr<BatchStream> batches;
  if (job.data().format() == DataConfig::CRITEO) {
    // Click-through-rate examples: this worker's shard, with its bags.
    ASSIGN_OR_RETURN(
        CtrExamples train,
        LoadCriteoFile(job.data().train_path(), CriteoFormatOf(job.data())));
    if (train.num_fields != spec.num_fields() ||
        train.num_dense != spec.input_size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("this worker's training data has ", train.num_dense,
                       " dense and ", train.num_fields,
                       " categorical columns, the "
                       "chief's ",
                       spec.input_size(), " and ", spec.num_fields(),
                       "; every task must see the same data files"));
    }
    RETURN_IF_ERROR(CheckSameExamplesAsTheChief(
        spec.num_train_examples(), train.num_examples,
        absl::StrCat("the training data ", job.data().train_path())));
    RETURN_IF_ERROR(CheckBatchFitsShards(job, train.num_examples, num_workers));
    auto shard =
        std::make_shared<CtrExamples>(CtrShardOf(train, index, num_workers));
    LOG(INFO) << "training on shard " << index << " of " << num_workers << " ("
              << shard->num_examples << " examples, " << shard->ids.size()
              << " ids) on " << options.device->Describe();
    batches = std::make_unique<BatchStream>(shard, stream_options);
  } else {
    ASSIGN_OR_RETURN(Dataset train, LoadIdxDataset(job.data().train_images(),
                                                   job.data().train_labels()));
    if (!absl::c_equal(train.example_shape, spec.example_shape())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this worker's training data has examples of shape [",
          absl::StrJoin(train.example_shape, ", "), "], but the chief's has [",
          absl::StrJoin(spec.example_shape(), ", "),
          "]; every task must see the same data files"));
    }
    // Every label inside the model's classes, named by file and record.
    RETURN_IF_ERROR(CheckLabels(train.labels,
                                static_cast<int>(spec.num_classes()),
                                job.data().train_labels()));
    RETURN_IF_ERROR(CheckSameExamplesAsTheChief(
        spec.num_train_examples(), train.num_examples,
        absl::StrCat("the training data ", job.data().train_images(), " and ",
                     job.data().train_labels())));
    RETURN_IF_ERROR(CheckBatchFitsShards(job, train.num_examples, num_workers));
    auto shard = std::make_shared<Dataset>(ShardOf(train, index, num_workers));
    LOG(INFO) << "training on shard " << index << " of " << num_workers << " ("
              << shard->num_examples << " examples) on "
              << options.device->Describe();
    batches = std::make_unique<BatchStream>(shard, stream_options);
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      definition->Instantiate(options.device, job.training().batch_size()));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ParameterClient> client,
      PlaceJobOnParameterServers(options.tf_config, spec, options.security));
  // Once the chief says the job ended, calls blocked on a server that will
  // never answer end at once (configuring too: a job that fails in its
  // first second may stop its servers while this worker still loads its
  // data); unhooked before the client goes away.
  keep_alive.OnJobEnd([c = client.get()] { c->Close(); });
  absl::Cleanup unhook = [&keep_alive] { keep_alive.OnJobEnd(nullptr); };
  if (auto ended = EndedWhilePreparing(keep_alive)) return *ended;
  if (absl::Status configured = client->Configure(spec.ps_config());
      !configured.ok()) {
    if (auto ended = EndedWhilePreparing(keep_alive)) return *ended;
    return configured;
  }

  TrainerOptions trainer_options;
  trainer_options.worker_index = index;
  trainer_options.incarnation = options.incarnation;
  trainer_options.spec = spec;
  trainer_options.heartbeat_interval = options.heartbeat_interval;
  trainer_options.recovery = options.recovery;
  trainer_options.slowdown = options.slowdown;
  trainer_options.background_calls = options.background_calls;
  trainer_options.push_then_pull = options.push_then_pull;
  if (const TrainingConfig& training = spec.config().training();
      training.has_sync_group_bytes()) {
    // 0: one group, after backward.
    trainer_options.sync_group_bytes =
        training.sync_group_bytes() > 0 ? training.sync_group_bytes()
                                        : std::numeric_limits<int64_t>::max();
  }
  TrainerParts parts;
  parts.device = options.device;
  parts.model = model.get();
  parts.variables = LogicalVariables(definition->variables());
  parts.tables = definition->tables();
  parts.client = client.get();
  parts.coordinator = options.coordinator;
  parts.batches = batches.get();
  parts.metrics = options.metrics;
  parts.live_metrics = options.live_metrics;
  parts.keep_alive = &keep_alive;
  parts.clock = options.clock;
  return Trainer(std::move(trainer_options), std::move(parts)).Run();
}

}  // namespace psflow
