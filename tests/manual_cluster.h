// A job whose roles the test starts by hand, each its own process on a
// free port of 127.0.0.1 (a chief, 2 parameter servers, 2 workers and an
// evaluator), so tests can kill, restart and leave out single tasks, which
// `psctl local` does not do. Every process is SIGKILLed when the cluster
// goes.
#ifndef PSFLOW_TESTS_MANUAL_CLUSTER_H_
#define PSFLOW_TESTS_MANUAL_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/subprocess.h"

namespace psflow::testing {

class ManualCluster {
 public:
  // `job`: the job config's path; `checkpoint_dir` the chief's
  // --checkpoint_dir; `chief_flags` more flags for the chief;
  // `role_flags` more flags for the other roles, by type ("ps", "worker",
  // "evaluator").
  ManualCluster(
      const std::string& job, const std::string& checkpoint_dir,
      std::vector<std::string> chief_flags = {},
      std::map<std::string, std::vector<std::string>> role_flags = {});
  ~ManualCluster();

  // The TF_CONFIG of task `type` `index` ("ps", 1).
  std::string TfConfig(const std::string& type, int index) const;
  // The address of a task ("chief", "ps0", "worker1", "evaluator0").
  std::string Address(const std::string& task) const;

  // Environment variables for every process of a task type ("chief",
  // "ps", ...) started from now on, beside its TF_CONFIG (e.g.
  // PSFLOW_FAULT_POINTS, common/fault_point.h).
  void SetEnv(const std::string& type, std::map<std::string, std::string> env);

  // Starts (or restarts) one task.
  Subprocess* Start(const std::string& type, int index);
  void StartAll();

  // SIGKILLs the task's newest process, leaves it down for `downtime`,
  // then starts it again (as an operator or Kubernetes would).
  Subprocess* KillAndRestart(const std::string& type, int index,
                             absl::Duration downtime);

  const std::string& result_file() const { return result_file_; }

  // The newest process of a task ("chief0", "worker1").
  Subprocess* Latest(const std::string& name);

 private:
  std::string job_;
  std::string checkpoint_dir_;
  std::vector<std::string> chief_flags_;
  std::map<std::string, std::vector<std::string>> role_flags_;
  std::map<std::string, std::map<std::string, std::string>> role_env_;
  std::string result_file_;
  std::map<std::string, int> ports_;
  std::map<std::string, std::vector<std::unique_ptr<Subprocess>>> processes_;
};

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_MANUAL_CLUSTER_H_
