#include "evaluator/evaluator.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/best_copy.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/status_macros.h"
#include "evaluator/ctr_evaluation.h"
#include "evaluator/job_end_watch.h"
#include "evaluator/model_snapshot.h"
#include "model/registry.h"

namespace psflow {

absl::StatusOr<EvaluationReport> EvaluateOnce(const JobSpec& spec,
                                              ParameterClient& client,
                                              Device& device,
                                              const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> model,
                   DefineJobModel(spec));
  ASSIGN_OR_RETURN(ModelSnapshot snapshot, PullModelSnapshot(*model, client));
  return EvaluateValues(spec, snapshot.values, snapshot.global_step, device,
                        data);
}

absl::StatusOr<EvaluationReport> EvaluateCheckpoint(const JobSpec& spec,
                                                    const std::string& path,
                                                    Device& device,
                                                    const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                   CheckpointReader::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> model,
                   DefineJobModel(spec));
  std::vector<std::vector<float>> values;
  for (const ModelVariable& v : model->variables()) {
    const CheckpointTensor* tensor = reader->Find(v.name());
    if (tensor == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " has no variable \"", v.name(), "\"; it is not this job's"));
    }
    ASSIGN_OR_RETURN(std::vector<float> tensor_values, reader->Read(*tensor));
    values.push_back(std::move(tensor_values));
  }
  return EvaluateValues(spec, values, reader->index().global_step(), device,
                        data);
}

absl::StatusOr<EvaluationReport> EvaluateValues(
    const JobSpec& spec, const std::vector<std::vector<float>>& values,
    int64_t global_step, Device& device, const Dataset& data) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDefinition> definition,
                   DefineJobModel(spec));
  const int batch_size = std::max(1, spec.config().evaluation().batch_size());
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   definition->Instantiate(&device, batch_size));
  RETURN_IF_ERROR(model->LoadParameters(
      std::vector<absl::Span<const float>>(values.begin(), values.end())));
  const float scale = definition->feature_scale();

  std::vector<int64_t> class_total(spec.num_classes()),
      class_correct(spec.num_classes());
  double loss = 0;
  int64_t correct = 0, seen = 0;
  std::vector<float> features;
  std::vector<int32_t> labels, predictions;
  for (int64_t begin = 0; begin < data.num_examples; begin += batch_size) {
    const int64_t n = std::min<int64_t>(batch_size, data.num_examples - begin);
    features.resize(n * data.num_features);
    labels.resize(n);
    predictions.resize(n);
    for (int64_t i = 0; i < n * data.num_features; ++i) {
      features[i] = data.features[begin * data.num_features + i] * scale;
    }
    for (int64_t i = 0; i < n; ++i) labels[i] = data.labels[begin + i];
    ASSIGN_OR_RETURN(
        BatchStats stats,
        model->Evaluate({n, features, labels}, absl::MakeSpan(predictions)));
    loss += stats.loss_sum;
    correct += stats.correct;
    seen += n;
    for (int64_t i = 0; i < n; ++i) {
      ++class_total[labels[i]];
      class_correct[labels[i]] += predictions[i] == labels[i];
    }
  }
  EvaluationReport report;
  report.set_global_step(global_step);
  report.set_loss(seen > 0 ? loss / seen : 0);
  report.set_accuracy(seen > 0 ? static_cast<double>(correct) / seen : 0);
  for (size_t c = 0; c < class_total.size(); ++c) {
    report.add_per_class_accuracy(class_total[c] > 0
                                      ? static_cast<double>(class_correct[c]) /
                                            class_total[c]
                                      : 0);
  }
  return report;
}

absl::Status Evaluator::Run() {
  const JobSpec& spec = *parts_.spec;
  const JobConfig& job = spec.config();
  static const Dataset* const kNoImages = new Dataset();
  const Dataset& test = parts_.test != nullptr ? *parts_.test : *kNoImages;
  const absl::Duration interval =
      absl::Seconds(std::max(0.1, job.evaluation().every_secs()));
  absl::Time next = absl::Now() + interval;
  absl::Time last_contact = absl::Now();
  // With checkpoints, each new one is evaluated once (from its files, so
  // the numbers belong to exactly what was saved; at most one per
  // interval, the newest) and the best is copied;
  // without, the live model is pulled every `interval`.
  // CTR models are evaluated live (their tables' rows come from the
  // servers); image models from each checkpoint when there are some.
  const std::string checkpoint_dir =
      parts_.ctr_test != nullptr ? "" : job.checkpoint().directory();
  // A pull of the live model can block (a server gone for good, a sync
  // step that never comes); the watch cancels it once the job is over.
  JobEndWatch watch(parts_.coordinator, parts_.client,
                    std::max(policy_.poll_interval, absl::Milliseconds(500)),
                    policy_.cancel_after_silence);
  // Evaluates the live model; nullopt when the watch cancelled it (the
  // loop's next status check says what became of the job).
  auto evaluate_live =
      [&]() -> absl::StatusOr<std::optional<EvaluationReport>> {
    const int64_t cancellations = watch.cancellations();
    absl::StatusOr<EvaluationReport> report =
        parts_.ctr_test != nullptr
            ? EvaluateCtrOnce(spec, *parts_.client, *parts_.device,
                              *parts_.ctr_test)
            : EvaluateOnce(spec, *parts_.client, *parts_.device, test);
    if (!report.ok() && watch.cancellations() != cancellations) {
      LOG(INFO) << "evaluation stopped: " << report.status().message();
      return std::nullopt;
    }
    RETURN_IF_ERROR(report.status());
    return std::optional<EvaluationReport>(*std::move(report));
  };
  std::string last_evaluated;
  std::optional<EvaluationReport> last_report;
  std::optional<BestRecord> best;
  if (!checkpoint_dir.empty()) {
    absl::StatusOr<std::optional<BestRecord>> read = ReadBest(checkpoint_dir);
    if (read.ok()) {
      best = *read;
    } else {
      LOG(WARNING) << read.status().message();
    }
    LOG(INFO) << "evaluating each new checkpoint in " << checkpoint_dir
              << "; the best is kept in " << BestDirectory(checkpoint_dir);
  }
  // Evaluates the checkpoint at `path` and keeps it if it is the best so
  // far; nullopt when it vanished (retention) or is damaged: skipped.
  auto evaluate_checkpoint = [&](const std::string& path)
      -> absl::StatusOr<std::optional<EvaluationReport>> {
    absl::StatusOr<EvaluationReport> report =
        EvaluateCheckpoint(spec, path, *parts_.device, test);
    if (absl::IsNotFound(report.status()) ||
        absl::IsDataLoss(report.status())) {
      LOG(WARNING) << "skipping " << path << ": " << report.status().message();
      return std::nullopt;
    }
    RETURN_IF_ERROR(report.status());
    if (!best.has_value() || report->accuracy() > best->accuracy) {
      best =
          BestRecord{report->global_step(), report->accuracy(), report->loss()};
      absl::Status kept = KeepAsBest(checkpoint_dir, path, *best);
      if (kept.ok()) {
        LOG(INFO) << "new best checkpoint: " << path << " (accuracy "
                  << report->accuracy() << ")";
      } else {
        LOG(WARNING) << "could not copy the best checkpoint: "
                     << kept.message();
      }
    }
    return std::optional<EvaluationReport>(*std::move(report));
  };
  while (true) {
    absl::StatusOr<StatusResponse> status =
        parts_.coordinator->GetStatus(absl::Seconds(5));
    if (!status.ok()) {
      if (absl::Now() - last_contact > policy_.chief_timeout) {
        return absl::UnavailableError(
            absl::StrCat("lost the chief: ", status.status().message()));
      }
      absl::SleepFor(policy_.retry_interval);
      continue;
    }
    last_contact = absl::Now();
    if (status->state() == FAILED) {
      return absl::AbortedError(
          absl::StrCat("the job failed: ", status->message()));
    }
    if (status->state() == SUCCEEDED) return absl::OkStatus();
    const bool final = status->state() == FINAL_EVALUATION;
    std::optional<EvaluationReport> evaluated;
    if (!checkpoint_dir.empty()) {
      if (final || absl::Now() >= next) {
        absl::StatusOr<std::optional<std::string>> latest =
            LatestCheckpoint(checkpoint_dir);
        if (!latest.ok()) LOG(WARNING) << latest.status().message();
        if (latest.ok() && latest->has_value() && **latest != last_evaluated) {
          // At most one evaluation per interval: checkpoints saved faster
          // than that are skipped (the newest is what matters).
          next = absl::Now() + interval;
          last_evaluated = **latest;
          ASSIGN_OR_RETURN(evaluated, evaluate_checkpoint(**latest));
          if (evaluated.has_value()) last_report = evaluated;
        } else {
          // Nothing new: look again within a second, not every tick.
          next = absl::Now() + std::min(interval, absl::Seconds(1));
        }
      }
      if (final && !evaluated.has_value()) {
        if (last_report.has_value()) {
          evaluated = last_report;  // the final checkpoint, evaluated
        } else {
          // No checkpoint to read: evaluate the live model.
          ASSIGN_OR_RETURN(evaluated, evaluate_live());
        }
      }
    } else if (final || absl::Now() >= next) {
      next = absl::Now() + interval;
      ASSIGN_OR_RETURN(evaluated, evaluate_live());
    }
    if (evaluated.has_value()) {
      EvaluationReport& report = *evaluated;
      report.set_final(final);
      std::vector<std::string> per_class;
      for (double a : report.per_class_accuracy()) {
        per_class.push_back(absl::StrFormat("%.2f", a));
      }
      if (report.has_auc()) {
        LOG(INFO) << absl::StrFormat(
            "%sstep %d: test AUC %.4f, log loss %.4f, accuracy %.4f",
            final ? "final evaluation, " : "", report.global_step(),
            report.auc(), report.loss(), report.accuracy());
      } else {
        LOG(INFO) << absl::StrFormat(
            "%sstep %d: test loss %.4f, accuracy %.4f; per class [%s]",
            final ? "final evaluation, " : "", report.global_step(),
            report.loss(), report.accuracy(), absl::StrJoin(per_class, " "));
      }
      if (const Parts::LiveMetrics* live = parts_.live; live != nullptr) {
        live->loss->Set(report.loss());
        live->accuracy->Set(report.accuracy());
        live->global_step->Set(static_cast<double>(report.global_step()));
        live->evaluations->Increment();
      }
      if (parts_.metrics != nullptr) {
        const int64_t step = report.global_step();
        absl::Status written =
            parts_.metrics->AddScalar("loss", step, report.loss());
        written.Update(
            parts_.metrics->AddScalar("accuracy", step, report.accuracy()));
        if (report.has_auc()) {
          written.Update(parts_.metrics->AddScalar("auc", step, report.auc()));
        }
        for (int c = 0; c < report.per_class_accuracy_size(); ++c) {
          written.Update(
              parts_.metrics->AddScalar(absl::StrCat("accuracy/class_", c),
                                        step, report.per_class_accuracy(c)));
        }
        written.Update(parts_.metrics->Flush());
        if (!written.ok()) {
          LOG(WARNING) << "metrics not written: " << written.message();
        }
      }
      absl::Status reported =
          parts_.coordinator->ReportEvaluation(report, absl::Seconds(10));
      if (!reported.ok()) LOG(WARNING) << reported.message();
      if (final) return absl::OkStatus();
    }
    absl::SleepFor(policy_.poll_interval);
  }
}

}  // namespace psflow
