// `psctl status`: one look at a running job, its rendering as a table, and
// whether the job is healthy.
//
// A look asks the chief for its description of every task
// (Coordinator.DescribeJob). Tasks the chief has not heard from (missing at
// start-up) are probed on their own ports, so the table tells a task that
// is up and not yet joined from one that does not answer. When the chief
// itself does not answer, every task the TF_CONFIG names is probed, which
// at the end of a job names who has not exited.
#ifndef PSFLOW_CLIENT_PSCTL_JOB_STATUS_H_
#define PSFLOW_CLIENT_PSCTL_JOB_STATUS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "proto/coordinator.pb.h"

namespace psflow {

struct StatusTarget {
  std::string chief_address;
  // Every task's address, for probing when the chief does not answer.
  std::optional<TfConfig> tf_config;
  TransportSecurity security;
};

struct JobLook {
  absl::Time when;
  // OK, or why the chief did not answer.
  absl::Status chief = absl::OkStatus();
  // Whether psctl called with TLS credentials (a failure's hint differs).
  bool with_tls = false;
  std::optional<JobDescription> description;
  // Tasks probed on their own ports: task name ("worker-1") -> address and
  // the probe's outcome (OK: it answers).
  struct Probe {
    std::string address;
    absl::Status status;
  };
  std::map<std::string, Probe> probes;
  // With --watch, when the chief stopped answering: how an earlier look
  // saw the job ("FINAL_EVALUATION at global step 11251 of 11250, 2s
  // earlier").
  std::string last_seen;
};

// Asks the chief, then probes (in parallel) what needs probing; every call
// is bounded by `timeout`.
JobLook LookAtJob(const StatusTarget& target, absl::Duration timeout);

// Whether the job is healthy, and if not, why (one line per problem).
// Healthy: training, starting up, paused for a restore, or succeeded, with
// no lost, failed or unreachable task. A chief that does not answer is not.
struct Health {
  bool healthy = true;
  std::vector<std::string> problems;
};
Health JudgeHealth(const JobLook& look);

// Whether the job has ended (succeeded or failed), or its chief is gone.
bool JobOver(const JobLook& look);

// `psctl status --watch`: whether to stop after `look`, the
// `unanswered`-th look in a row the chief did not answer (0 when it did).
// A chief that misses a look or two (busy, stopped a moment, not up yet)
// is looked at again; one silent for kWatchUnansweredLooks looks is gone.
inline constexpr int kWatchUnansweredLooks = 5;
bool WatchEnds(const JobLook& look, int unanswered);

// The look as text: a header, the task table, the verdict.
std::string RenderJobLook(const JobLook& look, const Health& health);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_JOB_STATUS_H_
