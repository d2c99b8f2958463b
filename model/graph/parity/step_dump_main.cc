// graph_step_dump: trains a job config's `model.graph` for a few steps on
// random CRITEO-shaped batches with plain SGD and writes every loss,
// probability and gradient (step_dump.h), for parity_check.py to replay
// in PyTorch.
//
//   graph_step_dump --job=configs/ctr_dlrm.json --out=/tmp/ctr_dlrm.json
//       [--steps=3] [--batch=16] [--learning_rate=0.1] [--seed=1]
//
// Exits 0 having written <out> and <out without .json>.f32; 1 naming the
// problem.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/job/job_config.h"
#include "model/graph/parity/step_dump.h"

ABSL_FLAG(std::string, job, "", "Job config (JSON) with a model.graph");
ABSL_FLAG(std::string, out, "",
          "Manifest to write (.json); the values go "
          "beside it (.f32)");
ABSL_FLAG(int32_t, steps, 3, "Training steps");
ABSL_FLAG(int64_t, batch, 16, "Examples per batch");
ABSL_FLAG(int32_t, ids_per_field, 4, "Distinct ids per categorical field");
ABSL_FLAG(double, learning_rate, 0.1, "SGD learning rate (variables, rows)");
ABSL_FLAG(double, row_scale, 0.1,
          "Initial rows uniform in [-row_scale, row_scale)");
ABSL_FLAG(uint64_t, seed, 1, "Initial values, rows and batches");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string job_path = absl::GetFlag(FLAGS_job);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (job_path.empty() || out.empty()) {
    std::cerr << "graph_step_dump: --job and --out are required\n";
    return 1;
  }
  psflow::StepDumpOptions options;
  options.steps = absl::GetFlag(FLAGS_steps);
  options.batch.size = absl::GetFlag(FLAGS_batch);
  options.batch.ids_per_field = absl::GetFlag(FLAGS_ids_per_field);
  options.learning_rate =
      static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  options.row_scale = static_cast<float>(absl::GetFlag(FLAGS_row_scale));
  options.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<psflow::JobConfig> job = psflow::LoadJobConfigFile(job_path);
  if (!job.ok()) {
    std::cerr << "graph_step_dump: " << job.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<psflow::StepDump> dump = psflow::RunGraphSteps(*job, options);
  absl::Status written =
      dump.ok() ? psflow::WriteStepDump(*dump, job_path, options, out)
                : dump.status();
  if (!written.ok()) {
    std::cerr << "graph_step_dump: " << job_path << ": " << written.message()
              << "\n";
    return 1;
  }
  return 0;
}
