#include "chief/final_evaluation.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "evaluation/image_evaluation.h"
#include "evaluation/test_data.h"
#include "model/device/cpu/cpu_device.h"

namespace psflow {
namespace {

void LogFinal(const EvaluationReport& report) {
  LOG(INFO) << absl::StrFormat(
      "final evaluation at step %d by %s: test accuracy %.4f, loss %.4f%s",
      report.global_step(), report.evaluated_by(), report.accuracy(),
      report.loss(),
      report.has_auc() ? absl::StrFormat(", AUC %.4f", report.auc()) : "");
}

absl::StatusOr<EvaluationReport> EvaluateOnChief(
    const FinalEvaluationOptions& options, const JobSpec& spec,
    ParameterClient& client, Device& device, const TestData& test) {
  if (!test.ctr && !options.final_checkpoint.empty()) {
    absl::StatusOr<EvaluationReport> report =
        EvaluateCheckpoint(spec, options.final_checkpoint, device, test.images);
    // A vanished or damaged checkpoint: the live model instead.
    if (report.ok() || (!absl::IsNotFound(report.status()) &&
                        !absl::IsDataLoss(report.status()))) {
      return report;
    }
    LOG(WARNING) << "evaluating the live model instead of "
                 << options.final_checkpoint << ": "
                 << report.status().message();
  }
  return EvaluateLiveModel(spec, client, device, test);
}

}  // namespace

absl::Status ObtainFinalEvaluation(const FinalEvaluationOptions& options,
                                   const JobSpec& spec, ParameterClient& client,
                                   JobCoordinator& coordinator) {
  if (!HasTestData(spec.config())) return absl::OkStatus();
  coordinator.BeginFinalEvaluation();
  Clock& clock = coordinator.clock();
  if (options.has_evaluator) {
    coordinator.SetActivity(
        absl::StrCat("waiting for the evaluator's final evaluation (at most ",
                     absl::FormatDuration(options.evaluator_timeout), ")"));
    absl::Time deadline = clock.Now() + options.evaluator_timeout;
    while (true) {
      const JobCoordinator::FinalEvaluationWait waited =
          coordinator.AwaitFinalEvaluation(
              deadline, options.keep_model
                            ? clock.Now() + options.check_interval
                            : absl::InfiniteFuture());
      if (waited == JobCoordinator::FinalEvaluationWait::kReceived) {
        LogFinal(*coordinator.last_evaluation());
        return absl::OkStatus();
      }
      if (waited == JobCoordinator::FinalEvaluationWait::kGivenUp) break;
      ASSIGN_OR_RETURN(const bool restored,
                       options.keep_model(/*wait_for_servers=*/false));
      if (restored) {
        // The evaluator evaluates the restored model from the start.
        deadline = clock.Now() + options.evaluator_timeout;
        coordinator.SetActivity(absl::StrCat(
            "waiting for the evaluator's final evaluation of the restored "
            "model (at most ",
            absl::FormatDuration(options.evaluator_timeout), ")"));
      }
    }
    LOG(WARNING) << "the evaluator sent no final evaluation; the chief "
                    "evaluates the final model itself";
  }
  coordinator.SetActivity("evaluating the final model");
  // A server lost meanwhile (its pulls fail: a restarted server has no
  // variables until the chief restores them) is restored and the model
  // evaluated again.
  const absl::StatusOr<TestData> test = LoadTestData(spec);
  std::unique_ptr<Device> device = CreateCpuDevice(options.cpu_threads);
  absl::StatusOr<EvaluationReport> report =
      test.ok() ? absl::UnknownError("not evaluated") : test.status();
  constexpr int kAttempts = 3;
  for (int attempt = 1; test.ok(); ++attempt) {
    report = EvaluateOnChief(options, spec, client, *device, *test);
    if (report.ok() || !options.keep_model || attempt == kAttempts) break;
    // Its error names the lost server and the fix itself.
    ASSIGN_OR_RETURN(const bool restored,
                     options.keep_model(/*wait_for_servers=*/true));
    if (!restored) break;
  }
  if (!report.ok()) {
    return absl::Status(
        report.status().code(),
        absl::StrCat(options.has_evaluator
                         ? "the evaluator sent no final evaluation and "
                         : "",
                     "the chief could not evaluate the final model: ",
                     report.status().message(),
                     " (the trained model is on the parameter servers and in "
                     "the final checkpoint, if the job saves them; make the "
                     "test data readable by the chief, or remove it from the "
                     "job config to train without a final evaluation)"));
  }
  coordinator.RecordChiefEvaluation(*report);
  LogFinal(*coordinator.last_evaluation());
  return absl::OkStatus();
}

}  // namespace psflow
