#include "tests/manual_cluster.h"

#include <signal.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/free_port.h"
#include "common/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/test_paths.h"

namespace psflow::testing {

ManualCluster::ManualCluster(
    const std::string& job, const std::string& checkpoint_dir,
    std::vector<std::string> chief_flags,
    std::map<std::string, std::vector<std::string>> role_flags)
    : job_(job),
      checkpoint_dir_(checkpoint_dir),
      chief_flags_(std::move(chief_flags)),
      role_flags_(std::move(role_flags)),
      result_file_(TempPath("result.json")) {
  std::set<int> taken;
  for (const char* task :
       {"chief", "ps0", "ps1", "worker0", "worker1", "evaluator0"}) {
    // A port is free only until someone binds it, so two picks can return
    // the same one: every task gets its own.
    absl::StatusOr<int> port;
    for (int attempt = 0; attempt < 100; ++attempt) {
      port = PickFreePort();
      if (!port.ok() || taken.insert(*port).second) break;
    }
    EXPECT_OK(port);
    ports_[task] = port.ok() ? *port : 1;
  }
}

ManualCluster::~ManualCluster() {
  for (auto& [name, list] : processes_) {
    for (auto& p : list) p->Signal(SIGKILL);
  }
}

std::string ManualCluster::Address(const std::string& task) const {
  return absl::StrCat("127.0.0.1:", ports_.at(task));
}

std::string ManualCluster::TfConfig(const std::string& type, int index) const {
  auto quoted = [&](const std::string& task) {
    return absl::StrCat("\"", Address(task), "\"");
  };
  return absl::StrCat(R"({"cluster": {"chief": [)", quoted("chief"),
                      R"(], "ps": [)", quoted("ps0"), ", ", quoted("ps1"),
                      R"(], "worker": [)", quoted("worker0"), ", ",
                      quoted("worker1"), R"(], "evaluator": [)",
                      quoted("evaluator0"), R"(]}, "task": {"type": ")", type,
                      R"(", "index": )", index, "}}");
}

Subprocess* ManualCluster::Start(const std::string& type, int index) {
  std::vector<std::string> argv;
  // Plaintext on loopback, as a single-host test may (security_test runs
  // a job with credentials).
  const std::string open = "--allow_unauthenticated_callers";
  const std::string bind = "--bind_host=127.0.0.1";
  if (type == "ps") {
    // A restarted chief waits at most this long for the servers to follow
    // it (ps/chief_fence.h), so the workers do not finish meanwhile.
    argv = {RunfilePath("ps/ps_server"), open, bind, "--chief_takeover_s=2",
            "--checkpoint_root=" + checkpoint_dir_};
  } else if (type == "chief") {
    argv = {RunfilePath("chief/chief"),
            open,
            bind,
            "--job=" + job_,
            "--checkpoint_dir=" + checkpoint_dir_,
            "--result_file=" + result_file_};
    argv.insert(argv.end(), chief_flags_.begin(), chief_flags_.end());
  } else if (type == "worker") {
    // The background thread on, as on a host with cores to spare (auto
    // leaves it off on a 2-core machine): the recovery and fault tests
    // cover the calls it starts.
    argv = {RunfilePath("worker/worker"), open, bind, "--device=cpu",
            "--background_calls=on"};
  } else {
    argv = {RunfilePath("evaluator/evaluator"), open, "--device=cpu"};
  }
  if (auto flags = role_flags_.find(type); flags != role_flags_.end()) {
    argv.insert(argv.end(), flags->second.begin(), flags->second.end());
  }
  const std::string name = absl::StrCat(type, index);
  std::map<std::string, std::string> env = {
      {"TF_CONFIG", TfConfig(type, index)}};
  if (auto extra = role_env_.find(type); extra != role_env_.end()) {
    env.insert(extra->second.begin(), extra->second.end());
  }
  auto process =
      std::make_unique<Subprocess>(argv, env, TempPath(name + ".log"));
  EXPECT_OK(process->Start());
  Subprocess* raw = process.get();
  processes_[name].push_back(std::move(process));
  return raw;
}

void ManualCluster::SetEnv(const std::string& type,
                           std::map<std::string, std::string> env) {
  role_env_[type] = std::move(env);
}

void ManualCluster::StartAll() {
  Start("ps", 0);
  Start("ps", 1);
  Start("chief", 0);
  Start("worker", 0);
  Start("worker", 1);
  Start("evaluator", 0);
}

Subprocess* ManualCluster::KillAndRestart(const std::string& type, int index,
                                          absl::Duration downtime) {
  Subprocess* process = Latest(absl::StrCat(type, index));
  process->Signal(SIGKILL);
  EXPECT_OK(process->Wait(absl::Seconds(10)));
  absl::SleepFor(downtime);
  return Start(type, index);
}

Subprocess* ManualCluster::Latest(const std::string& name) {
  return processes_.at(name).back().get();
}

}  // namespace psflow::testing
