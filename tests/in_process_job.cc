#include "tests/in_process_job.h"

#include <utility>

#include "client/local_ps_shard.h"
#include "common/job/placement.h"
#include "common/status_macros.h"
#include "model/initializer.h"
#include "model/registry.h"
#include "proto/protocol.h"

namespace psflow::testing {

JobSpec SoftmaxRegressionSpec(UpdateMode mode, int64_t total_steps,
                              double learning_rate) {
  JobSpec spec;
  spec.mutable_config()->mutable_model()->mutable_softmax_regression();
  spec.mutable_config()->mutable_training()->set_mode(mode);
  spec.set_total_steps(total_steps);
  spec.set_num_workers(1);
  spec.add_example_shape(4);
  spec.set_num_classes(2);
  ConfigureRequest& ps = *spec.mutable_ps_config();
  ps.set_protocol_version(kProtocolVersion);
  ps.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  ps.mutable_learning_rate()->set_learning_rate(learning_rate);
  ps.set_mode(mode);
  ps.set_num_workers(1);
  ps.set_replicas_to_aggregate(1);
  return spec;
}

absl::StatusOr<std::unique_ptr<InProcessJob>> InProcessJob::Start(
    const JobSpec& spec, const TaskId& self, bool configure_servers) {
  auto job = std::make_unique<InProcessJob>();
  ASSIGN_OR_RETURN(job->definition, DefineJobModel(spec));
  job->variables = LogicalVariables(job->definition->variables());
  ASSIGN_OR_RETURN(Placement placement,
                   PlaceVariables(job->variables, 1, 1 << 20));
  std::vector<EmbeddingTableSpec> tables;
  for (const ModelTable& t : job->definition->tables()) {
    tables.push_back(t.spec);
    placement.tables.push_back({t.name(), t.dim()});
  }
  job->core =
      std::make_unique<ParameterServerCore>(ParameterServerCore::Options{});
  std::vector<std::unique_ptr<PsShard>> shards;
  shards.push_back(std::make_unique<LocalPsShard>(job->core.get(), "ps-0"));
  job->client = std::make_unique<ParameterClient>(std::move(shards), placement,
                                                  ParameterClient::Options());
  if (configure_servers) {
    RETURN_IF_ERROR(job->client->Configure(spec.ps_config()));
    RETURN_IF_ERROR(job->client->CreateVariables());
    RETURN_IF_ERROR(job->client->CreateTables(tables));
    const std::vector<std::vector<float>> initial =
        InitialValues(job->definition->variables(), 1);
    std::vector<ParameterClient::Const> values;
    for (size_t i = 0; i < job->variables.size(); ++i) {
      values.emplace_back(job->variables[i].name, initial[i]);
    }
    RETURN_IF_ERROR(job->client->Assign(values)->Wait());
  }
  JobCoordinator::Options options;
  options.num_workers = spec.num_workers();
  job->coordinator = std::make_unique<JobCoordinator>(options);
  job->coordinator->SetSpec(spec);
  job->chief =
      std::make_unique<LocalCoordinatorClient>(job->coordinator.get(), self);
  return job;
}

}  // namespace psflow::testing
