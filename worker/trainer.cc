#include "worker/trainer.h"

#include <memory>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cluster_client.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/batch_stream.h"
#include "data/dataset.h"
#include "model/registry.h"

namespace psflow {
namespace {

// Host buffers for every variable, in model order, from the device's
// AllocateHost: page-locked on CUDA, so uploads of pulled parameters and
// downloads of gradients for the push run asynchronously at full speed.
struct HostTensors {
  std::vector<std::shared_ptr<HostBuffer>> buffers;  // owns `values`
  std::vector<absl::Span<float>> values;
  std::vector<ParameterClient::Mutable> Mutable(
      const std::vector<LogicalVariable>& vars) {
    std::vector<ParameterClient::Mutable> out;
    for (size_t i = 0; i < vars.size(); ++i) {
      out.emplace_back(vars[i].name, values[i]);
    }
    return out;
  }
  std::vector<ParameterClient::Const> Const(
      const std::vector<LogicalVariable>& vars) const {
    std::vector<ParameterClient::Const> out;
    for (size_t i = 0; i < vars.size(); ++i) {
      out.emplace_back(vars[i].name, absl::MakeConstSpan(values[i]));
    }
    return out;
  }
  std::vector<absl::Span<const float>> ConstSpans() const {
    return std::vector<absl::Span<const float>>(values.begin(), values.end());
  }
  std::vector<absl::Span<float>> Spans() { return values; }
};

absl::StatusOr<HostTensors> Allocate(Device& device,
                                     const std::vector<LogicalVariable>& vars) {
  HostTensors t;
  for (const LogicalVariable& v : vars) {
    ASSIGN_OR_RETURN(std::shared_ptr<HostBuffer> buffer,
                     device.AllocateHost(v.num_elements()));
    t.values.push_back(buffer->span());
    t.buffers.push_back(std::move(buffer));
  }
  return t;
}

// Progress since the last heartbeat.
struct Window {
  double loss = 0;
  int64_t correct = 0, examples = 0;
  absl::Time start = absl::Now();
};

}  // namespace

// How long a worker whose parameter-server calls fail waits for a chief
// that does not answer either before it gives up.
constexpr absl::Duration kChiefSilenceWithServersDown = absl::Seconds(30);

absl::Status RunTrainer(const TrainerOptions& options) {
  const JobSpec& spec = options.spec;
  const JobConfig& job = spec.config();
  const int index = options.tf_config.task.index;
  const int num_workers = spec.num_workers();
  const bool sync = job.training().mode() == SYNC;

  ASSIGN_OR_RETURN(Dataset train, LoadIdxDataset(job.data().train_images(),
                                                 job.data().train_labels()));
  if (!absl::c_equal(train.example_shape, spec.example_shape()) ||
      train.num_classes > spec.num_classes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this worker's training data has examples of shape [",
        absl::StrJoin(train.example_shape, ", "), "] and ", train.num_classes,
        " classes, but the chief's has [",
        absl::StrJoin(spec.example_shape(), ", "), "] and ", spec.num_classes(),
        "; every task must see the same data files"));
  }
  auto shard = std::make_shared<Dataset>(ShardOf(train, index, num_workers));
  LOG(INFO) << "training on shard " << index << " of " << num_workers << " ("
            << shard->num_examples << " examples) on "
            << options.device->Describe();
  BatchStream::Options stream_options;
  stream_options.batch_size = job.training().batch_size();
  stream_options.seed = job.training().seed();
  BatchStream batches(shard, stream_options);

  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  const std::vector<LogicalVariable> vars =
      LogicalVariables(definition->variables());
  ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      definition->Instantiate(options.device, job.training().batch_size()));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ParameterClient> client,
      ConnectToJobParameterServers(options.tf_config, spec, options.security));

  HostTensors params[2], grads[2];
  // Async keeps two gradient buffers so that a step's push travels while
  // the next step computes; a buffer is reused only after its push ended.
  for (HostTensors* t : {&params[0], &params[1], &grads[0], &grads[1]}) {
    ASSIGN_OR_RETURN(*t, Allocate(*options.device, vars));
  }
  std::shared_ptr<PsHandle> pushes[2];
  int grad_slot = 0;
  int current = 0;
  int64_t local_steps = 0, examples = 0, stale = 0, version = 0;
  Window window;
  absl::Time next_heartbeat = absl::Now() + options.heartbeat_interval;
  const int log_every = std::max(1, job.logging().log_every_steps());

  // Restores by the chief bump the model's generation: after one, what
  // this worker holds is stale and it pulls again.
  int64_t generation = 0;
  // This worker's identity and counters; the rest is filled by the caller.
  auto base_report = [&] {
    ProgressReport report;
    report.set_worker_index(index);
    report.set_incarnation(options.incarnation);
    report.set_local_steps(local_steps);
    report.set_examples(examples);
    report.set_global_step(version);
    report.set_generation(generation);
    return report;
  };
  auto heartbeat = [&](bool finished) -> absl::StatusOr<StatusResponse> {
    ProgressReport report = base_report();
    const double seconds =
        std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - window.start));
    if (window.examples > 0) {
      report.set_loss(window.loss / window.examples);
      report.set_accuracy(static_cast<double>(window.correct) /
                          window.examples);
      report.set_examples_per_sec(window.examples / seconds);
    }
    report.set_finished(finished);
    if (options.metrics != nullptr && window.examples > 0) {
      (void)options.metrics->AddScalar("loss", version, report.loss());
      (void)options.metrics->AddScalar("accuracy", version, report.accuracy());
      (void)options.metrics->AddScalar("examples_per_sec", version,
                                       report.examples_per_sec());
      (void)options.metrics->Flush();
    }
    window = Window();
    return options.coordinator->ReportProgress(report, absl::Seconds(10));
  };

  if (absl::StatusOr<StatusResponse> status =
          options.coordinator->GetStatus(absl::Seconds(10));
      status.ok()) {
    generation = status->generation();
    // A worker that starts late (slow data loading) may find the job over.
    if (status->state() == SUCCEEDED || status->state() == FINAL_EVALUATION) {
      LOG(INFO) << "the job has already finished training (global step "
                << status->global_step() << "); nothing to do";
      return absl::OkStatus();
    }
    if (status->state() == FAILED) {
      return absl::AbortedError(
          absl::StrCat("the job failed: ", status->message()));
    }
  }
  bool job_over = false;
  // Waits out a pause, or failing parameter-server calls (`cause`), until
  // the chief trains again; OK means "pull again and go on" (or job_over).
  auto recover = [&](const absl::Status& cause) -> absl::Status {
    for (auto& push : pushes) {
      if (push != nullptr) (void)push->Wait();  // Stale now either way.
      push = nullptr;
    }
    if (!cause.ok()) {
      LOG(WARNING) << "parameter server call failed (" << cause.message()
                   << "); waiting for the chief to recover the job";
    }
    const absl::Time start = absl::Now();
    const absl::Time give_up = start + options.recovery_timeout;
    bool announced = false;
    while (true) {
      ProgressReport report = base_report();
      report.set_paused(true);
      absl::StatusOr<StatusResponse> status =
          options.coordinator->ReportProgress(report, absl::Seconds(5));
      if (!status.ok() && !cause.ok() &&
          absl::Now() - start > kChiefSilenceWithServersDown) {
        // Neither the servers nor the chief answer: the job ended (the
        // chief stops answering 2 s after the end) or the cluster is gone.
        return absl::UnavailableError(absl::StrCat(
            cause.message(), "; the chief does not answer either (",
            status.status().message(), ")"));
      }
      if (status.ok()) {
        switch (status->state()) {
          case FAILED:
            return absl::AbortedError(
                absl::StrCat("the chief ended the job: ", status->message()));
          case SUCCEEDED:
          case FINAL_EVALUATION:
            job_over = true;
            return absl::OkStatus();
          case PAUSED:
            if (!announced) {
              LOG(INFO) << "paused: " << status->message();
              announced = true;
            }
            break;
          default:
            if (status->generation() != generation) {
              LOG(INFO) << "the chief restored the model (generation "
                        << status->generation() << ", global step "
                        << status->global_step() << "); resuming";
              generation = status->generation();
              return absl::OkStatus();
            }
            // Training as before: retry, unless the chief has not yet
            // noticed a server it will restore (give it a few seconds).
            if (cause.ok() || absl::Now() - start > absl::Seconds(3)) {
              return absl::OkStatus();
            }
        }
      }
      if (absl::Now() > give_up) {
        return cause.ok() ? absl::DeadlineExceededError(absl::StrCat(
                                "the job stayed paused for ",
                                absl::FormatDuration(options.recovery_timeout)))
                          : cause;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  };
  // Consecutive failed attempts share one recovery deadline.
  absl::Time failing_since = absl::InfiniteFuture();

  const absl::Time training_start = absl::Now();
  std::shared_ptr<PsHandle> pull =
      client->Pull(params[current].Mutable(vars), sync ? version : 0);
  // Drops the step in progress and pulls the model afresh (any version).
  auto restart = [&] {
    (void)pull->Wait();
    pull = client->Pull(params[current].Mutable(vars), 0);
  };
  // Handles a failed parameter-server call: OK to restart, else the error.
  auto on_failure = [&](const absl::Status& cause) -> absl::Status {
    if (failing_since == absl::InfiniteFuture()) failing_since = absl::Now();
    if (absl::Now() - failing_since > options.recovery_timeout) return cause;
    return recover(cause);
  };
  while (true) {
    if (absl::Status pulled = pull->Wait(); !pulled.ok()) {
      RETURN_IF_ERROR(on_failure(pulled));
      if (job_over) break;
      restart();
      continue;
    }
    version = pull->min_version();
    if (version >= spec.total_steps()) break;
    std::optional<Batch> batch = batches.Next();
    if (!batch.has_value()) break;  // Streams are endless; defensive.
    RETURN_IF_ERROR(model->LoadParameters(params[current].ConstSpans()));
    if (!sync) {
      // Fetch the next step's parameters while this one computes.
      pull = client->Pull(params[1 - current].Mutable(vars));
    }
    if (pushes[grad_slot] != nullptr) {
      absl::Status pushed = pushes[grad_slot]->Wait();
      pushes[grad_slot] = nullptr;
      if (!pushed.ok()) {
        RETURN_IF_ERROR(on_failure(pushed));
        if (job_over) break;
        restart();
        continue;
      }
    }
    ASSIGN_OR_RETURN(
        BatchStats stats,
        model->TrainStep({batch->size, batch->features, batch->labels},
                         grads[grad_slot].Spans()));
    std::shared_ptr<PsHandle> push =
        client->Push(grads[grad_slot].Const(vars), version, index);
    if (sync) {
      absl::Status pushed = push->Wait();
      if (absl::IsAborted(pushed)) {
        ++stale;  // The step closed before this gradient arrived.
      } else if (!pushed.ok()) {
        RETURN_IF_ERROR(on_failure(pushed));
        if (job_over) break;
        restart();
        continue;
      }
    } else {
      pushes[grad_slot] = std::move(push);
      grad_slot = 1 - grad_slot;
    }
    failing_since = absl::InfiniteFuture();
    ++local_steps;
    examples += batch->size;
    window.loss += stats.loss_sum;
    window.correct += stats.correct;
    window.examples += stats.examples;
    if (local_steps % log_every == 0) {
      LOG(INFO) << absl::StrFormat(
          "step %d (global %d/%d), epoch %d, batch loss %.4f, accuracy %.3f",
          local_steps, version, spec.total_steps(), batch->epoch,
          stats.loss_sum / stats.examples,
          static_cast<double>(stats.correct) / stats.examples);
    }
    if (absl::Now() >= next_heartbeat) {
      next_heartbeat = absl::Now() + options.heartbeat_interval;
      absl::StatusOr<StatusResponse> status = heartbeat(false);
      if (status.ok() && status->state() == FAILED) {
        return absl::AbortedError(
            absl::StrCat("the chief ended the job: ", status->message()));
      }
      if (!status.ok()) LOG(WARNING) << status.status().message();
      if (status.ok() &&
          (status->state() == PAUSED || status->generation() != generation)) {
        RETURN_IF_ERROR(recover(absl::OkStatus()));
        if (job_over) break;
        restart();
        continue;
      }
    }
    if (sync) {
      pull = client->Pull(params[current].Mutable(vars), version + 1);
    } else {
      current = 1 - current;
    }
  }
  for (auto& push : pushes) {
    if (push != nullptr) RETURN_IF_ERROR(push->Wait());
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - training_start);
  LOG(INFO) << absl::StrFormat(
      "finished: %d steps, %d examples%s in %.3fs (%.0f examples/s); global "
      "step %d",
      local_steps, examples, sync ? absl::StrCat(", ", stale, " stale") : "",
      seconds, examples / std::max(seconds, 1e-9), version);
  absl::StatusOr<StatusResponse> status = heartbeat(true);
  if (!status.ok()) LOG(WARNING) << status.status().message();
  return absl::OkStatus();
}

}  // namespace psflow
