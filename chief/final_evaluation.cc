#include "chief/final_evaluation.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job/job_config.h"
#include "common/logging.h"
#include "common/status_macros.h"
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
    ParameterClient& client) {
  ASSIGN_OR_RETURN(TestData test, LoadTestData(spec));
  std::unique_ptr<Device> device = CreateCpuDevice(options.cpu_threads);
  return EvaluateLiveModel(spec, client, *device, test);
}

}  // namespace

absl::Status ObtainFinalEvaluation(const FinalEvaluationOptions& options,
                                   const JobSpec& spec, ParameterClient& client,
                                   JobCoordinator& coordinator) {
  if (!HasTestData(spec.config())) return absl::OkStatus();
  if (options.has_evaluator) {
    coordinator.SetActivity(
        absl::StrCat("waiting for the evaluator's final evaluation (at most ",
                     absl::FormatDuration(options.evaluator_timeout), ")"));
    std::optional<EvaluationReport> report = coordinator.RunFinalEvaluation(
        coordinator.clock().Now() + options.evaluator_timeout);
    if (report.has_value()) {
      LogFinal(*report);
      return absl::OkStatus();
    }
    LOG(WARNING) << "the evaluator sent no final evaluation; the chief "
                    "evaluates the final model itself";
  }
  coordinator.SetActivity("evaluating the final model");
  absl::StatusOr<EvaluationReport> report =
      EvaluateOnChief(options, spec, client);
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
