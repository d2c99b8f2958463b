#include "client/psctl/job_config_check.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/psctl/synth_ctr_job.h"
#include "common/host_cores.h"
#include "common/job/job_config.h"
#include "data/criteo.h"
#include "data/dataset.h"
#include "evaluation/test_data.h"
#include "model/job_plan.h"
#include "model/memory_estimate.h"
#include "model/registry.h"
#include "proto/coordinator.pb.h"

namespace psflow {
namespace {

std::string Plural(int64_t n, const std::string& noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string DescribeData(const JobConfig& job, const TrainingData& train,
                         std::optional<int64_t> test_examples) {
  std::string text = Plural(train.num_examples, "training example");
  if (job.data().format() == DataConfig::CRITEO) {
    absl::StrAppend(&text, " of ", train.example_shape[0], " integer and ",
                    train.num_fields, " categorical columns");
  } else {
    absl::StrAppend(&text, " of [", absl::StrJoin(train.example_shape, ", "),
                    "] in ", train.num_classes, " classes");
  }
  if (test_examples.has_value()) {
    absl::StrAppend(&text, ", ", Plural(*test_examples, "test example"));
  } else if (!HasTestData(job)) {
    absl::StrAppend(&text, ", no test data (no evaluation)");
  }
  return text;
}

std::string Summary(const JobConfig& job, const TrainingData& train,
                    std::optional<int64_t> test_examples, const JobPlan& plan,
                    const JobConfigCheckOptions& options) {
  int64_t parameters = 0;
  for (const ModelVariable& v : plan.model->variables()) {
    parameters += v.num_elements();
  }
  std::string tables;
  if (!plan.tables.empty()) {
    std::vector<std::string> each;
    for (const EmbeddingTableSpec& t : plan.tables) {
      each.push_back(absl::StrCat(t.name(), " dim ", t.dim()));
    }
    tables =
        absl::StrCat(" and ", Plural(plan.tables.size(), "embedding table"),
                     " (", absl::StrJoin(each, ", "), ")");
  }
  const TrainingConfig& t = job.training();
  return absl::StrCat(
      job.name(), ": model ", plan.model->Describe(), ", ", parameters,
      " parameters (", FormatBytes(parameters * 4), ")", tables, " on ",
      Plural(options.num_ps, "parameter server"), "; ",
      Plural(options.num_workers, "worker"), ", ", UpdateMode_Name(t.mode()),
      ", batch ", t.batch_size(), ", ",
      TotalGlobalSteps(job, train.num_examples, options.num_workers),
      " global steps; data: ", DescribeData(job, train, test_examples));
}

std::string MemoryDetail(const JobConfig& job, const JobPlan& plan,
                         const JobConfigCheckOptions& options) {
  std::string against = absl::StrCat(options.host.source, " (",
                                     FormatBytes(options.host.bytes), ")");
  if (const int64_t mib = job.training().worker_memory_mib(); mib > 0) {
    against = absl::StrCat("training.worker_memory_mib (",
                           FormatBytes(mib << 20), ") and ", against);
  }
  std::string detail = absl::StrCat(
      "memory: ", DescribeMemoryEstimate(plan.memory), "; fits ", against);
  if (plan.evaluation_memory.has_value()) {
    absl::StrAppend(&detail, "; the evaluation (batches of ",
                    plan.evaluation_memory->batch_size, ") needs about ",
                    FormatBytes(plan.evaluation_memory->worker_bytes()));
  }
  return detail;
}

std::string SynthesizeDetail(const JobConfig& job, const SynthCtrOptions& o) {
  return absl::StrCat(
      "data: ", job.data().train_path(),
      " does not exist yet: psctl local generates it (data.synthesize: ",
      o.num_train, " training and ", o.num_test, " test examples into ",
      o.out_dir,
      "); a chief started any other way needs it first: psctl data "
      "synth-ctr --out_dir=",
      o.out_dir, " --train_examples=", o.num_train,
      " --test_examples=", o.num_test, " --dense=", o.num_dense,
      " --fields=", o.num_fields, " --vocabulary=", o.vocabulary,
      " --zipf=", o.zipf, " --weight_scale=", o.weight_scale,
      " --seed=", o.seed);
}

}  // namespace

JobConfigReport CheckJobConfigFile(const std::string& path,
                                   const JobConfigCheckOptions& options) {
  JobConfigReport report;
  // The chief's parser: strict JSON (a key given twice is refused),
  // unknown fields, every value validated. Its first problem ends the
  // check: nothing else can be read from a config it refuses.
  absl::StatusOr<JobConfig> loaded = LoadJobConfigFile(path);
  if (!loaded.ok()) {
    report.problems.emplace_back(loaded.status().message());
    return report;
  }
  const JobConfig& job = *loaded;
  auto problem = [&](const absl::Status& status) {
    report.problems.push_back(
        absl::StrCat("job config ", path, ": ", status.message()));
  };
  const bool criteo = job.data().format() == DataConfig::CRITEO;

  // The model's own settings, whatever the data.
  const absl::Status model = ValidateModelConfig(job.model());
  if (!model.ok()) problem(model);

  // The training data, as the chief reads it (header and labels, or every
  // CRITEO line) and then as every worker does (every image byte).
  std::optional<TrainingData> train;
  std::optional<SynthCtrOptions> synthesized;
  // psctl local writes the training and the test file together.
  const bool to_synthesize = SynthesizesCtrData(job);
  if (absl::Status matches = CheckSynthesizedDataMatches(job); !matches.ok()) {
    problem(matches);
  }
  if (to_synthesize) {
    absl::StatusOr<SynthCtrOptions> o = SynthCtrOptionsOf(job);
    if (o.ok()) {
      synthesized = *o;
      train = CtrTrainingData(job, o->num_train);
    } else {
      problem(o.status());
    }
  } else {
    // The chief reads the images' header; every worker reads each byte,
    // which is checked below once the plan says a worker can hold them.
    absl::StatusOr<TrainingData> described = DescribeTrainingData(job);
    if (described.ok()) {
      train = *std::move(described);
    } else {
      problem(described.status());
    }
  }

  // The test data, as the evaluator reads it: the shape and classes of the
  // training data's (checked only when those are known), every label and
  // line.
  std::optional<int64_t> test_examples;
  if (HasTestData(job) && !to_synthesize) {
    absl::StatusOr<int64_t> count;
    if (criteo) {
      absl::StatusOr<CtrExamples> test = DescribeCriteoFile(
          job.data().test_path(), CriteoFormatOf(job.data()));
      count = test.ok() ? absl::StatusOr<int64_t>(test->num_examples)
                        : test.status();
    } else if (train.has_value()) {
      // The header's count now; the images, read whole as the evaluator
      // reads them, once the plan says the evaluation can hold them.
      absl::StatusOr<DatasetInfo> info = DescribeIdxDataset(
          job.data().test_images(), job.data().test_labels());
      count = info.ok() ? absl::StatusOr<int64_t>(info->num_examples)
                        : info.status();
    } else {
      count =
          CheckIdxDataset(job.data().test_images(), job.data().test_labels());
    }
    if (count.ok()) {
      test_examples = *count;
    } else {
      problem(count.status());
    }
  }

  // The chief's plan: shards, the model on this data, memory, placement.
  std::optional<JobPlan> plan;
  if (model.ok() && train.has_value()) {
    JobPlanOptions plan_options;
    plan_options.num_ps = options.num_ps;
    plan_options.num_workers = options.num_workers;
    plan_options.host = options.host;
    plan_options.has_test_data = HasTestData(job);
    plan_options.test_examples = test_examples.value_or(0);
    // As the chief plans it on a host like this one (its own final
    // evaluation runs on the cores it may use).
    plan_options.evaluation_threads = UsableCores();
    absl::StatusOr<JobPlan> planned = PlanJob(job, *train, plan_options);
    if (planned.ok()) {
      plan = std::move(*planned);
    } else {
      problem(planned.status());
    }
  }
  // Every image byte, as a worker reads it: only for data a worker can
  // hold (a header claiming gigabytes was refused by the plan already).
  if (plan.has_value() && !criteo && !to_synthesize) {
    const absl::Status read =
        CheckIdxDataset(job.data().train_images(), job.data().train_labels())
            .status();
    if (!read.ok()) problem(read);
    // The test set as the evaluator reads it, checked against the model.
    if (test_examples.has_value()) {
      JobSpec spec;
      *spec.mutable_config() = job;
      for (int64_t d : train->example_shape) spec.add_example_shape(d);
      spec.set_num_classes(train->num_classes);
      const absl::Status test = LoadTestData(spec).status();
      if (!test.ok()) problem(test);
    }
  }
  if (!report.problems.empty()) return report;

  report.summary = Summary(job, *train, test_examples, *plan, options);
  report.details.push_back(MemoryDetail(job, *plan, options));
  if (synthesized.has_value()) {
    report.details.push_back(SynthesizeDetail(job, *synthesized));
  }
  return report;
}

}  // namespace psflow
