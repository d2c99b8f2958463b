#include "evaluator/evaluator.h"

#include <algorithm>
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

// The longest a status request asks the chief to hold its answer while
// nothing changes (the chief holds a few seconds at most); its deadline is
// that wait plus kStatusDeadline.
constexpr absl::Duration kLongestWait = absl::Seconds(5);
constexpr absl::Duration kStatusDeadline = absl::Seconds(5);

}  // namespace

// What Run() keeps from one round to the next.
struct Evaluator::Loop {
  const Dataset* test = nullptr;  // parts_.test, or an empty set
  absl::Duration interval;        // between evaluations
  // Empty: the live model is evaluated (see Run).
  std::string checkpoint_dir;
  JobEndWatch* watch = nullptr;
  absl::Time next;          // when the next evaluation is due
  absl::Time last_contact;  // with the chief
  // Live evaluations that failed for a server's outage: since when (the
  // recovery window), and when to try again.
  absl::Time failing_since = absl::InfiniteFuture();
  absl::Time retry_at = absl::InfinitePast();
  std::optional<int64_t> generation;
  // The chief's last answer: the next request waits for a change from it.
  std::optional<StatusResponse> known;
  // With checkpoints: the latest one evaluated, its report, the best.
  std::string last_evaluated;
  std::optional<EvaluationReport> last_report;
  std::optional<BestCheckpointKeeper> best;
};

absl::Status Evaluator::Run() {
  const JobConfig& job = parts_.spec->config();
  static const Dataset* const kNoImages = new Dataset();
  Loop loop;
  loop.test = parts_.test != nullptr ? parts_.test : kNoImages;
  loop.interval = absl::Seconds(std::max(0.1, job.evaluation().every_secs()));
  loop.next = parts_.clock->Now() + loop.interval;
  loop.last_contact = parts_.clock->Now();
  // With checkpoints, each new one is evaluated once (from its files, so
  // the numbers belong to exactly what was saved; at most one per
  // interval, the newest) and the best is copied;
  // without, the live model is pulled every `interval`.
  // CTR models are evaluated live (their tables' rows come from the
  // servers); image models from each checkpoint when there are some.
  loop.checkpoint_dir =
      parts_.ctr_test != nullptr ? "" : job.checkpoint().directory();
  // A pull of the live model can block (a server gone for good, a sync
  // step that never comes); the watch cancels it once the job is over.
  std::optional<JobEndWatch> own_watch;
  if (parts_.job_end_watch == nullptr) {
    own_watch.emplace(parts_.coordinator, parts_.client,
                      std::max(policy_.poll_interval, absl::Milliseconds(500)),
                      policy_.cancel_after_silence, parts_.clock);
  }
  loop.watch =
      parts_.job_end_watch != nullptr ? parts_.job_end_watch : &*own_watch;
  if (!loop.checkpoint_dir.empty()) LoadBest(loop);
  while (true) {
    // The chief holds each request until the job's state changes or the
    // next evaluation is due (a long poll): the final evaluation starts
    // the moment training ends. After an answer that came sooner (a
    // change, or a chief that answers at once) the loop waits out the
    // rest of poll_interval, so it asks at most once per poll_interval.
    const absl::Time asked = parts_.clock->Now();
    ASSIGN_OR_RETURN(std::optional<StatusResponse> status, AskTheChief(loop));
    if (!status.has_value()) {  // No answer yet: ask again soon.
      parts_.clock->SleepFor(policy_.retry_interval);
      continue;
    }
    if (status->state() == FAILED) {
      return absl::AbortedError(
          absl::StrCat("the job failed: ", status->message()));
    }
    if (status->state() == SUCCEEDED) return absl::OkStatus();
    // While the chief restores a lost server, a pull could read the
    // values the server was created with: wait for training to resume.
    if (status->state() == PAUSED || status->state() == INITIALIZING) {
      parts_.clock->SleepUntil(asked + policy_.poll_interval);
      continue;
    }
    NoteGeneration(loop, *status);
    const bool final = status->state() == FINAL_EVALUATION;
    ASSIGN_OR_RETURN(std::optional<EvaluationReport> evaluated,
                     EvaluateIfDue(loop, final));
    if (evaluated.has_value()) {
      const absl::Status published = Publish(*evaluated, final);
      // A final evaluation the chief refused (it restored the model while
      // the pulls ran) or did not receive (a lost answer) is made again:
      // the job waits for it. A chief gone for good ends the loop
      // (AskTheChief, --chief_timeout_s).
      if (final && published.ok()) return absl::OkStatus();
    }
    parts_.clock->SleepUntil(asked + policy_.poll_interval);
  }
}

absl::Duration Evaluator::WaitForChange(const Loop& loop) const {
  if (!loop.known.has_value()) return absl::ZeroDuration();
  const JobState state = loop.known->state();
  // Paused or initializing: nothing is due before training resumes.
  if (state == PAUSED || state == INITIALIZING) return kLongestWait;
  // Else until the next evaluation (or the look for a new checkpoint, or
  // the retry of a skipped one) is due.
  const absl::Time due = loop.failing_since != absl::InfiniteFuture()
                             ? loop.retry_at
                             : std::max(loop.next, loop.retry_at);
  return std::clamp(due - parts_.clock->Now(), absl::ZeroDuration(),
                    kLongestWait);
}

void Evaluator::LoadBest(Loop& loop) {
  absl::StatusOr<std::optional<BestRecord>> read =
      ReadBest(loop.checkpoint_dir);
  if (!read.ok()) LOG(WARNING) << read.status().message();
  loop.best.emplace(loop.checkpoint_dir,
                    read.ok() ? *read : std::optional<BestRecord>());
  LOG(INFO) << "evaluating each new checkpoint in " << loop.checkpoint_dir
            << "; the best is kept in " << BestDirectory(loop.checkpoint_dir);
}

absl::StatusOr<std::optional<StatusResponse>> Evaluator::AskTheChief(
    Loop& loop) {
  const absl::Duration wait = WaitForChange(loop);
  absl::StatusOr<StatusResponse> status =
      wait > absl::ZeroDuration()
          ? parts_.coordinator->AwaitStatusChange(*loop.known, wait,
                                                  kStatusDeadline)
          : parts_.coordinator->GetStatus(kStatusDeadline);
  if (!status.ok()) {
    // The watch may have heard the job's end before the chief exited.
    if (std::optional<StatusResponse> ended = loop.watch->JobEnded()) {
      status = *std::move(ended);
    }
  }
  if (!status.ok()) {
    const absl::Duration silent = parts_.clock->Now() - loop.last_contact;
    if (silent > policy_.chief_timeout) {
      return absl::UnavailableError(
          absl::StrCat("lost the chief: ", status.status().message()));
    }
    if (silent > policy_.chief_silence_with_servers_down &&
        loop.watch->ServersSilent()) {
      return absl::UnavailableError(absl::StrCat(
          "lost the chief (", status.status().message(),
          ") and no parameter server answers either: the job ended or the "
          "cluster is gone"));
    }
    return std::nullopt;
  }
  loop.last_contact = parts_.clock->Now();
  loop.known = *status;
  return std::optional<StatusResponse>(*std::move(status));
}

void Evaluator::NoteGeneration(Loop& loop, const StatusResponse& status) {
  if (loop.generation.has_value() && *loop.generation != status.generation()) {
    LOG(INFO) << "the chief restored the model (generation "
              << status.generation() << ")";
    // A skipped live evaluation is tried again at once.
    if (loop.failing_since != absl::InfiniteFuture())
      loop.retry_at = parts_.clock->Now();
  }
  loop.generation = status.generation();
}

absl::StatusOr<std::optional<EvaluationReport>> Evaluator::EvaluateIfDue(
    Loop& loop, bool final) {
  // After a skipped evaluation, the next try waits for retry_at.
  const absl::Time now = parts_.clock->Now();
  const bool live_due =
      now >= loop.retry_at && (final || now >= loop.next ||
                               loop.failing_since != absl::InfiniteFuture());
  if (!loop.checkpoint_dir.empty()) {
    return EvaluateCheckpointsIfDue(loop, final, live_due);
  }
  if (!live_due) return std::nullopt;
  loop.next = now + loop.interval;
  return EvaluateLive(loop);
}

absl::StatusOr<std::optional<EvaluationReport>>
Evaluator::EvaluateCheckpointsIfDue(Loop& loop, bool final, bool live_due) {
  std::optional<EvaluationReport> evaluated;
  if (final || parts_.clock->Now() >= loop.next) {
    ASSIGN_OR_RETURN(evaluated, EvaluateNewCheckpoint(loop));
  }
  if (final && !evaluated.has_value()) {
    if (loop.last_report.has_value()) {
      evaluated = loop.last_report;  // the final checkpoint, evaluated
    } else if (live_due) {
      // No checkpoint to read: evaluate the live model.
      ASSIGN_OR_RETURN(evaluated, EvaluateLive(loop));
    }
  }
  return evaluated;
}

absl::StatusOr<std::optional<EvaluationReport>>
Evaluator::EvaluateNewCheckpoint(Loop& loop) {
  absl::StatusOr<std::optional<std::string>> latest =
      LatestCheckpoint(loop.checkpoint_dir);
  if (!latest.ok()) LOG(WARNING) << latest.status().message();
  if (!latest.ok() || !latest->has_value() || **latest == loop.last_evaluated) {
    // Nothing new: look again within a second, not every tick.
    loop.next = parts_.clock->Now() + std::min(loop.interval, absl::Seconds(1));
    return std::nullopt;
  }
  // At most one evaluation per interval: checkpoints saved faster than
  // that are skipped (the newest is what matters).
  loop.next = parts_.clock->Now() + loop.interval;
  loop.last_evaluated = **latest;
  ASSIGN_OR_RETURN(std::optional<EvaluationReport> evaluated,
                   EvaluateCheckpointAt(loop, **latest));
  if (evaluated.has_value()) loop.last_report = evaluated;
  return evaluated;
}

absl::StatusOr<std::optional<EvaluationReport>> Evaluator::EvaluateCheckpointAt(
    Loop& loop, const std::string& path) {
  absl::StatusOr<EvaluationReport> report =
      EvaluateCheckpoint(*parts_.spec, path, *parts_.device, *loop.test);
  if (absl::IsNotFound(report.status()) || absl::IsDataLoss(report.status())) {
    LOG(WARNING) << "skipping " << path << ": " << report.status().message();
    return std::nullopt;
  }
  RETURN_IF_ERROR(report.status());
  absl::StatusOr<bool> kept = loop.best->Offer(
      path,
      BestRecord{report->global_step(), report->accuracy(), report->loss()});
  if (!kept.ok()) {
    LOG(WARNING) << "could not copy the best checkpoint: "
                 << kept.status().message();
  } else if (*kept) {
    LOG(INFO) << "new best checkpoint: " << path << " (accuracy "
              << report->accuracy() << ")";
  }
  return std::optional<EvaluationReport>(*std::move(report));
}

absl::StatusOr<std::optional<EvaluationReport>> Evaluator::EvaluateLive(
    Loop& loop) {
  // Tests lose a server between the chief's "training" and the pulls.
  FaultPoint("evaluator.evaluate_live");
  const int64_t cancellations = loop.watch->cancellations();
  // The model generation the pulls begin in, as last heard: the chief
  // refuses the report if it restored the model meanwhile.
  const std::optional<int64_t> generation = loop.generation;
  absl::StatusOr<EvaluationReport> report =
      parts_.ctr_test != nullptr
          ? EvaluateCtrOnce(*parts_.spec, *parts_.client, *parts_.device,
                            *parts_.ctr_test)
          : EvaluateOnce(*parts_.spec, *parts_.client, *parts_.device,
                         *loop.test);
  if (!report.ok() && loop.watch->cancellations() != cancellations) {
    LOG(INFO) << "evaluation stopped: " << report.status().message();
    return std::nullopt;
  }
  if (report.ok()) {
    loop.failing_since = absl::InfiniteFuture();
    if (generation.has_value()) report->set_model_generation(*generation);
    return std::optional<EvaluationReport>(*std::move(report));
  }
  if (!IsServerOutage(report.status())) return report.status();
  RETURN_IF_ERROR(SkipForOutage(loop, report.status()));
  return std::nullopt;
}

absl::Status Evaluator::SkipForOutage(Loop& loop, const absl::Status& cause) {
  // A server lost or restarting: the chief recovers the job (workers
  // wait the same way); this round is skipped and tried again.
  const absl::Time now = parts_.clock->Now();
  if (loop.failing_since == absl::InfiniteFuture()) loop.failing_since = now;
  if (now - loop.failing_since > policy_.recovery_timeout) {
    return absl::Status(
        cause.code(),
        absl::StrCat("the parameter servers could not serve an evaluation "
                     "for ",
                     absl::FormatDuration(now - loop.failing_since),
                     " (--recovery_timeout_s): ", cause.message()));
  }
  skipped_.fetch_add(1);
  if (parts_.live != nullptr && parts_.live->skipped != nullptr) {
    parts_.live->skipped->Increment();
  }
  LOG(WARNING) << "evaluation skipped, a parameter server call failed ("
               << cause << "); waiting for the chief to recover "
               << "the job, trying again within "
               << absl::FormatDuration(policy_.recovery_retry_interval);
  loop.retry_at = now + policy_.recovery_retry_interval;
  return absl::OkStatus();
}

absl::Status Evaluator::Publish(EvaluationReport& report, bool final) {
  report.set_final(final);
  // Reported first: numbers the chief refuses (a restore met the pulls)
  // are not logged or charted as the model's.
  absl::Status reported =
      parts_.coordinator->ReportEvaluation(report, absl::Seconds(10));
  if (absl::IsAborted(reported)) {
    LOG(WARNING) << "evaluation at step " << report.global_step()
                 << " discarded: " << reported.message();
    return reported;
  }
  std::vector<std::string> per_class;
  for (double a : report.per_class_accuracy()) {
    per_class.push_back(absl::StrFormat("%.2f", a));
  }
  if (report.has_auc()) {
    LOG(INFO) << absl::StrFormat(
        "%sstep %d: test AUC %.4f, log loss %.4f, accuracy %.4f",
        final ? "final evaluation, " : "", report.global_step(), report.auc(),
        report.loss(), report.accuracy());
  } else {
    LOG(INFO) << absl::StrFormat(
        "%sstep %d: test loss %.4f, accuracy %.4f; per class [%s]",
        final ? "final evaluation, " : "", report.global_step(), report.loss(),
        report.accuracy(), absl::StrJoin(per_class, " "));
  }
  if (const Parts::LiveMetrics* live = parts_.live; live != nullptr) {
    live->loss->Set(report.loss());
    live->accuracy->Set(report.accuracy());
    live->global_step->Set(static_cast<double>(report.global_step()));
    live->evaluations->Increment();
  }
  if (parts_.metrics != nullptr) WriteMetrics(report);
  if (!reported.ok()) LOG(WARNING) << reported.message();
  return reported;
}

void Evaluator::WriteMetrics(const EvaluationReport& report) {
  const int64_t step = report.global_step();
  absl::Status written = parts_.metrics->AddScalar("loss", step, report.loss());
  written.Update(
      parts_.metrics->AddScalar("accuracy", step, report.accuracy()));
  if (report.has_auc()) {
    written.Update(parts_.metrics->AddScalar("auc", step, report.auc()));
  }
  for (int c = 0; c < report.per_class_accuracy_size(); ++c) {
    written.Update(parts_.metrics->AddScalar(absl::StrCat("accuracy/class_", c),
                                             step,
                                             report.per_class_accuracy(c)));
  }
  written.Update(parts_.metrics->Flush());
  if (!written.ok()) {
    LOG(WARNING) << "metrics not written: " << written.message();
  }
}

}  // namespace psflow
