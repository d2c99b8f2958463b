// Test helper: a whole job inside one process, for testing a role's logic
// without processes or sockets. One parameter server (LocalPsShard over a
// ParameterServerCore), a ParameterClient configured with the spec's
// update rule and holding the model's initial values, and the chief's
// JobCoordinator (spec set: TRAINING) reached through a
// LocalCoordinatorClient that speaks for `self`.
#ifndef PSFLOW_TESTS_IN_PROCESS_JOB_H_
#define PSFLOW_TESTS_IN_PROCESS_JOB_H_

#include <limits>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/job_coordinator.h"
#include "chief/local_coordinator_client.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/task.h"
#include "model/model.h"
#include "proto/coordinator.pb.h"
#include "ps/ps_core.h"

namespace psflow::testing {

// The job the role tests share: one worker training softmax regression
// on 4 features and 2 classes with SGD at `learning_rate`, in `mode`.
JobSpec SoftmaxRegressionSpec(UpdateMode mode, int64_t total_steps,
                              double learning_rate);

class InProcessJob {
 public:
  // `configure_servers` false leaves the server unconfigured, so every
  // call to it fails (FailedPrecondition). The coordinator measures time
  // on `clock`.
  static absl::StatusOr<std::unique_ptr<InProcessJob>> Start(
      const JobSpec& spec, const TaskId& self, bool configure_servers = true,
      Clock* clock = &RealClock());

  // Configures the server, creates the model's variables and tables and
  // assigns their initial values (what Start does unless told not to, and
  // what a chief does to a server it restores).
  absl::Status ConfigureServers(const JobSpec& spec);

  // Replaces the server by a fresh, unconfigured one (a restarted
  // ps_server): the client's calls fail FailedPrecondition ("not
  // configured yet") until ConfigureServers. Not while another thread
  // reads `core`.
  void RestartServer();

  // Makes every later push reach the server `delay` after it was sent
  // (pulls stay immediate), as a push still on the wire would: a worker
  // that pulls before its push was applied sees the values without it.
  void DeferPushes(absl::Duration delay);

  // Makes every later push of a gradient computed at `version` (a global
  // step) or later fail, Unavailable, without reaching the server (the
  // first `count` of them); and how many did. Each call adds a rule with
  // its own count.
  void FailPushesFrom(int64_t version,
                      int64_t count = std::numeric_limits<int64_t>::max());
  int64_t failed_pushes() const;

  // Makes the server hand out memory as one on the worker's host shares it
  // (PsShard::AllocateShared; heap memory here): a push that fails from it
  // retires it. How many runs were handed out so far.
  void ShareMemory();
  int shared_allocations() const;
  // Once `after` shared allocations succeeded, the next `count` find no
  // memory (a region still being offered): the worker gets ordinary memory
  // for them.
  void RefuseSharedAllocations(int after, int count);

  std::unique_ptr<ModelDefinition> definition;
  std::vector<LogicalVariable> variables;  // the model's, in order
  std::unique_ptr<ParameterServerCore> core;
  std::unique_ptr<ParameterClient> client;
  std::unique_ptr<JobCoordinator> coordinator;
  std::unique_ptr<LocalCoordinatorClient> chief;

 private:
  PsShard* shard_ = nullptr;  // owned by `client`
  std::vector<std::unique_ptr<ParameterServerCore>> retired_cores_;
};

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_IN_PROCESS_JOB_H_
