#include "evaluator/evaluator.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/best_copy.h"
#include "checkpoint/state_file.h"
#include "common/fault_point.h"
#include "common/logging.h"
#include "common/metrics/event_file_writer.h"
#include "common/status_macros.h"
#include "evaluation/ctr_evaluation.h"
#include "evaluation/image_evaluation.h"
#include "evaluator/job_end_watch.h"
#include "model/registry.h"

namespace psflow {
namespace {

// How a pull fails while a server is lost, restarting or being restored:
// unreachable, timed out, "not configured yet", variables not created yet,
// a call cut off by a closing connection. Anything else (a bad model, bad
// data) is the evaluator's own error.
bool IsServerOutage(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsFailedPrecondition(status) || absl::IsNotFound(status) ||
         absl::IsCancelled(status) || absl::IsAborted(status);
}

}  // namespace

absl::Status Evaluator::Run() {
  const JobSpec& spec = *parts_.spec;
  const JobConfig& job = spec.config();
  static const Dataset* const kNoImages = new Dataset();
  const Dataset& test = parts_.test != nullptr ? *parts_.test : *kNoImages;
  const absl::Duration interval =
      absl::Seconds(std::max(0.1, job.evaluation().every_secs()));
  absl::Time next = parts_.clock->Now() + interval;
  absl::Time last_contact = parts_.clock->Now();
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
  std::optional<JobEndWatch> own_watch;
  if (parts_.job_end_watch == nullptr) {
    own_watch.emplace(parts_.coordinator, parts_.client,
                      std::max(policy_.poll_interval, absl::Milliseconds(500)),
                      policy_.cancel_after_silence, parts_.clock);
  }
  JobEndWatch& watch =
      parts_.job_end_watch != nullptr ? *parts_.job_end_watch : *own_watch;
  // Live evaluations that failed for a server's outage: since when (the
  // recovery window), and when to try again.
  absl::Time failing_since = absl::InfiniteFuture();
  absl::Time retry_at = absl::InfinitePast();
  std::optional<int64_t> generation;
  // Evaluates the live model; nullopt when the watch cancelled it (the
  // loop's next status check says what became of the job) or a server's
  // outage skipped it.
  auto evaluate_live =
      [&]() -> absl::StatusOr<std::optional<EvaluationReport>> {
    // Tests lose a server between the chief's "training" and the pulls.
    FaultPoint("evaluator.evaluate_live");
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
    if (report.ok()) {
      failing_since = absl::InfiniteFuture();
      return std::optional<EvaluationReport>(*std::move(report));
    }
    if (!IsServerOutage(report.status())) return report.status();
    // A server lost or restarting: the chief recovers the job (workers
    // wait the same way); this round is skipped and tried again.
    const absl::Time now = parts_.clock->Now();
    if (failing_since == absl::InfiniteFuture()) failing_since = now;
    if (now - failing_since > policy_.recovery_timeout) {
      return absl::Status(
          report.status().code(),
          absl::StrCat("the parameter servers could not serve an evaluation "
                       "for ",
                       absl::FormatDuration(now - failing_since),
                       " (--recovery_timeout_s): ", report.status().message()));
    }
    skipped_.fetch_add(1);
    if (parts_.live != nullptr && parts_.live->skipped != nullptr) {
      parts_.live->skipped->Increment();
    }
    LOG(WARNING) << "evaluation skipped, a parameter server call failed ("
                 << report.status() << "); waiting for the chief to recover "
                 << "the job, trying again within "
                 << absl::FormatDuration(policy_.recovery_retry_interval);
    retry_at = now + policy_.recovery_retry_interval;
    return std::nullopt;
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
      // The watch may have heard the job's end before the chief exited.
      if (std::optional<StatusResponse> ended = watch.JobEnded()) {
        status = *std::move(ended);
      }
    }
    if (!status.ok()) {
      if (parts_.clock->Now() - last_contact > policy_.chief_timeout) {
        return absl::UnavailableError(
            absl::StrCat("lost the chief: ", status.status().message()));
      }
      parts_.clock->SleepFor(policy_.retry_interval);
      continue;
    }
    last_contact = parts_.clock->Now();
    if (status->state() == FAILED) {
      return absl::AbortedError(
          absl::StrCat("the job failed: ", status->message()));
    }
    if (status->state() == SUCCEEDED) return absl::OkStatus();
    // While the chief restores a lost server, a pull could read the
    // values the server was created with: wait for training to resume.
    if (status->state() == PAUSED || status->state() == INITIALIZING) {
      parts_.clock->SleepFor(policy_.poll_interval);
      continue;
    }
    if (generation.has_value() && *generation != status->generation()) {
      LOG(INFO) << "the chief restored the model (generation "
                << status->generation() << ")";
      if (failing_since != absl::InfiniteFuture())
        retry_at = parts_.clock->Now();
    }
    generation = status->generation();
    const bool final = status->state() == FINAL_EVALUATION;
    // After a skipped evaluation, the next try waits for retry_at.
    const absl::Time now = parts_.clock->Now();
    const bool live_due =
        now >= retry_at &&
        (final || now >= next || failing_since != absl::InfiniteFuture());
    std::optional<EvaluationReport> evaluated;
    if (!checkpoint_dir.empty()) {
      if (final || parts_.clock->Now() >= next) {
        absl::StatusOr<std::optional<std::string>> latest =
            LatestCheckpoint(checkpoint_dir);
        if (!latest.ok()) LOG(WARNING) << latest.status().message();
        if (latest.ok() && latest->has_value() && **latest != last_evaluated) {
          // At most one evaluation per interval: checkpoints saved faster
          // than that are skipped (the newest is what matters).
          next = parts_.clock->Now() + interval;
          last_evaluated = **latest;
          ASSIGN_OR_RETURN(evaluated, evaluate_checkpoint(**latest));
          if (evaluated.has_value()) last_report = evaluated;
        } else {
          // Nothing new: look again within a second, not every tick.
          next = parts_.clock->Now() + std::min(interval, absl::Seconds(1));
        }
      }
      if (final && !evaluated.has_value()) {
        if (last_report.has_value()) {
          evaluated = last_report;  // the final checkpoint, evaluated
        } else if (live_due) {
          // No checkpoint to read: evaluate the live model.
          ASSIGN_OR_RETURN(evaluated, evaluate_live());
        }
      }
    } else if (live_due) {
      next = now + interval;
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
    parts_.clock->SleepFor(policy_.poll_interval);
  }
}

}  // namespace psflow
