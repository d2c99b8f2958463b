// Fault injection on a real job (tests/manual_cluster.h: a chief, 2
// parameter servers, 2 workers and an evaluator, each its own process on
// 127.0.0.1): in one phase of the job,
//
//   initial save      while ps-1 writes the initial checkpoint (ckpt-0),
//   training          once training has saved its first scheduled
//                     checkpoint,
//   save              while ps-1 writes the first scheduled checkpoint,
//   final save        when the chief is about to save the final checkpoint
//                     (every worker has trained its last step), or
//   final evaluation  when the final checkpoint is saved and the chief is
//                     about to ask for the final evaluation
//
// (all but training reached through fault points, common/fault_point.h:
// the process pauses there and logs it, and the fault follows at once),
// one task is
//
//   kill-restart  SIGKILLed and started again 1 s later (as Kubernetes
//                 would),
//   kill          SIGKILLed for good, or
//   stop          SIGSTOPped for 3 s (a hung host), then SIGCONTed,
//
// in async and sync mode, and the trial checks what the fault allows:
//
//   - the job's result: the chief's exit status agrees with result.json,
//     and the job succeeds unless the fault leaves no way on (a lost
//     parameter server or a needed sync worker that never comes back: the
//     job then fails, naming it, within its recovery window);
//   - a successful job's final test accuracy is within 1 point of a
//     fault-free run of the same job;
//   - every process still running exits within 30 s of the chief;
//   - every checkpoint the state file lists verifies.
//
// Each trial prints one table row (FAULT_ROW ...; docs/testing.md keeps a
// full run's table). //tests:fault_injection_test runs every trial (tag
// soak: on demand, `bazel test --test_tag_filters=
// //tests:fault_injection_test`);
// //tests:fault_injection_smoke runs the CI subset (PSFLOW_FAULT_TRIALS=smoke).
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/manual_cluster.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::ManualCluster;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::HasSubstr;

enum class Fault { kKillRestart, kKill, kStop };
enum class Phase {
  kInitialSave,
  kTraining,
  kSave,
  kFinalSave,
  kFinalEvaluation
};

struct Trial {
  std::string type;  // "ps", "worker", "chief", "evaluator"
  int index = 0;
  Fault fault = Fault::kKillRestart;
  std::string mode;    // "ASYNC" or "SYNC"
  bool smoke = false;  // in the CI subset
  // A failure found by this harness and not fixed yet (why, as far as it
  // is known): the trial runs and prints its row, and is reported as
  // skipped while it still fails, and as a failure once it passes (so the
  // mark goes when the fix lands).
  const char* known_open = nullptr;
  Phase phase = Phase::kTraining;
};

std::string FaultName(Fault fault) {
  switch (fault) {
    case Fault::kKillRestart:
      return "kill-restart";
    case Fault::kKill:
      return "kill";
    case Fault::kStop:
      return "stop";
  }
  return "?";
}

// Where a phase's fault is injected: the task whose log shows the fault
// point, its role (which gets the setting) and the setting; none for
// training (the first scheduled checkpoint marks it).
struct PhasePoint {
  std::string task, role, point, setting;
};
std::optional<PhasePoint> PhasePointOf(Phase phase) {
  switch (phase) {
    case Phase::kTraining:
      return std::nullopt;
    case Phase::kInitialSave:  // each server's first save: ckpt-0
      return PhasePoint{"ps1", "ps", "ps.save_shard", "ps.save_shard=500ms@1"};
    case Phase::kSave:  // the first scheduled one
      return PhasePoint{"ps1", "ps", "ps.save_shard", "ps.save_shard=500ms@2"};
    case Phase::kFinalSave:
      return PhasePoint{"chief0", "chief", "chief.final_save",
                        "chief.final_save=2s"};
    case Phase::kFinalEvaluation:
      return PhasePoint{"chief0", "chief", "chief.final_evaluation",
                        "chief.final_evaluation=2s"};
  }
  return std::nullopt;
}

std::string PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kInitialSave:
      return "initial save";
    case Phase::kTraining:
      return "training";
    case Phase::kSave:
      return "save";
    case Phase::kFinalSave:
      return "final save";
    case Phase::kFinalEvaluation:
      return "final evaluation";
  }
  return "?";
}

// Whether the job can still succeed after the fault.
bool ShouldSucceed(const Trial& t) {
  if (t.fault != Fault::kKill) return true;
  if (t.type == "ps") {
    // Its state cannot come back; once the final checkpoint holds the
    // trained model (evaluated from the files), it is no longer needed.
    return t.phase == Phase::kFinalEvaluation;
  }
  if (t.type == "worker") {
    // Sync needs both while training; after its last step none is needed.
    return t.mode == "ASYNC" || t.phase == Phase::kFinalSave ||
           t.phase == Phase::kFinalEvaluation;
  }
  return true;  // the evaluator: the chief evaluates without it
}

// The recovery windows are shortened so that a trial whose job cannot go
// on ends in seconds: lost after 3 s of silence, a lost worker or server
// waited for 10 s.
const std::vector<std::string> kChiefFlags = {
    "--heartbeat_timeout_s=3", "--worker_replacement_timeout_s=10",
    "--ps_return_timeout_s=10"};

constexpr int64_t kCheckpointInterval = 300;  // steps

std::string JobConfig(const std::string& mode) {
  return TestJob(mode, 3000,
                 absl::StrCat(R"("checkpoint": {"save_every_steps": )",
                              kCheckpointInterval, R"(, "max_to_keep": 3})"));
}

// The most steps any restore threw away, from the chief's "restored ...
// (the job had reached R: N steps to train again)" lines; 0 without one.
int64_t LostSteps(const std::string& chief_output) {
  const std::string kMarker = " steps to train again)";
  int64_t most = 0;
  for (size_t end = chief_output.find(kMarker); end != std::string::npos;
       end = chief_output.find(kMarker, end + 1)) {
    size_t begin = end;
    while (begin > 0 &&
           std::isdigit(static_cast<unsigned char>(chief_output[begin - 1]))) {
      --begin;
    }
    int64_t steps = 0;
    if (begin < end &&
        absl::SimpleAtoi(chief_output.substr(begin, end - begin), &steps)) {
      most = std::max(most, steps);
    }
  }
  return most;
}

// The step of the checkpoint a "... /ckpt-<step> ..." piece of a log line
// names; -1 when there is none.
int64_t CheckpointStepIn(const std::string& line) {
  const size_t at = line.find("/ckpt-");
  if (at == std::string::npos) return -1;
  size_t end = at + 6;
  while (end < line.size() &&
         std::isdigit(static_cast<unsigned char>(line[end]))) {
    ++end;
  }
  int64_t step = -1;
  if (!absl::SimpleAtoi(line.substr(at + 6, end - at - 6), &step)) return -1;
  return step;
}

// A restore during the run ("restored <dir>/ckpt-N") that took an older
// checkpoint than the newest this chief had saved before it ("saved
// <dir>/ckpt-M", M > N): the work between them was thrown away for
// nothing. Empty when every restore took the newest.
std::string StaleRestore(const std::string& chief_output) {
  int64_t newest = -1;
  for (absl::string_view piece : absl::StrSplit(chief_output, '\n')) {
    const std::string line(piece);
    if (line.find("] saved /") != std::string::npos) {
      newest = std::max(newest, CheckpointStepIn(line));
    } else if (line.find("] restored /") != std::string::npos &&
               CheckpointStepIn(line) < newest) {
      return absl::StrCat("restored an older checkpoint than ckpt-", newest,
                          ", saved before it: ", line);
    }
  }
  return "";
}

struct Outcome {
  int chief_exit = -1;
  std::string state;  // from result.json
  double accuracy = -1;
  double max_exit_seconds = 0;  // of the others, after the chief
  std::string slowest;          // that task, and its output's end
  std::string slowest_output;
  int checkpoints = 0, verified = 0;
  int64_t lost_steps = 0;  // the most any restore threw away
  std::string chief_output;
};

absl::StatusOr<JsonValue> ReadResult(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 1 << 20));
  return ParseJson(text);
}

// Waits for the chief, then for every other task's newest process, and
// checks every checkpoint the state file lists.
Outcome Finish(ManualCluster& cluster, const std::string& dir,
               const std::string& faulted) {
  Outcome outcome;
  Subprocess* chief = cluster.Latest("chief0");
  absl::StatusOr<int> code = chief->Wait(absl::Minutes(5));
  EXPECT_OK(code) << chief->Output();
  outcome.chief_exit = code.ok() ? *code : -1;
  outcome.chief_output = chief->Output();
  outcome.lost_steps = LostSteps(outcome.chief_output);
  const absl::Time chief_done = absl::Now();
  // All tasks are watched at once, so each one's own exit time is measured
  // (waiting for them in turn would charge one slow task's time to every
  // task after it). Past two minutes a task is ended here so the trial
  // ends; the caller checks the 30 s bound.
  std::map<std::string, Subprocess*> running;
  for (const char* task : {"ps0", "ps1", "worker0", "worker1", "evaluator0"}) {
    running[task] = cluster.Latest(task);
  }
  auto exited = [&](const std::string& task, Subprocess* process) {
    const double after = absl::ToDoubleSeconds(absl::Now() - chief_done);
    if (task != faulted && after > outcome.max_exit_seconds) {
      outcome.max_exit_seconds = after;
      outcome.slowest = task;
      const std::string output = process->Output();
      outcome.slowest_output =
          output.substr(output.size() > 3000 ? output.size() - 3000 : 0);
    }
  };
  while (!running.empty() && absl::Now() - chief_done < absl::Minutes(2)) {
    absl::SleepFor(absl::Milliseconds(10));
    for (auto it = running.begin(); it != running.end();) {
      if (it->second->Exited()) {
        exited(it->first, it->second);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [task, process] : running) {
    process->Signal(SIGKILL);
    (void)process->Wait(absl::Seconds(10));
    exited(task, process);
  }
  absl::StatusOr<JsonValue> result = ReadResult(cluster.result_file());
  EXPECT_OK(result) << outcome.chief_output;
  if (result.ok()) {
    if (const JsonValue* state = result->Find("state")) {
      outcome.state = state->string_value();
    }
    if (const JsonValue* accuracy = result->Find("test_accuracy")) {
      outcome.accuracy = accuracy->number_value();
    }
  }
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (state.ok()) {
    for (const std::string& name : state->all_model_checkpoint_paths()) {
      ++outcome.checkpoints;
      absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
          CheckpointReader::Open(dir + "/" + name);
      if (reader.ok() && (*reader)->Verify().empty()) ++outcome.verified;
    }
  }
  return outcome;
}

// Waits until `task`'s output shows it paused at `point`.
void WaitForFaultPoint(ManualCluster& cluster, const std::string& task,
                       const std::string& point) {
  const std::string line = "fault point " + point + ":";
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (absl::Now() < deadline) {
    if (cluster.Latest(task)->Output().find(line) != std::string::npos) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  FAIL() << task << " never reached " << point << ":\n"
         << cluster.Latest(task)->Output();
}

// Waits until the state file lists a checkpoint saved during training.
void WaitForTraining(const std::string& dir) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
    if (state.ok() && state->model_checkpoint_path() != "ckpt-0" &&
        !state->model_checkpoint_path().empty()) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  FAIL() << "no checkpoint saved during training in " << dir;
}

// A fault-free run's accuracy, once per mode.
double Baseline(const std::string& mode) {
  static std::map<std::string, double>* baselines =
      new std::map<std::string, double>();
  if (auto it = baselines->find(mode); it != baselines->end()) {
    return it->second;
  }
  const std::string dir = TempPath("baseline_" + mode);
  ManualCluster cluster(
      WriteTestFile("baseline_" + mode + ".json", JobConfig(mode)), dir,
      kChiefFlags);
  cluster.StartAll();
  const Outcome outcome = Finish(cluster, dir, "");
  EXPECT_EQ(outcome.state, "SUCCEEDED") << outcome.chief_output;
  (*baselines)[mode] = outcome.accuracy;
  return outcome.accuracy;
}

// "ps1_kill_restart_ASYNC"; other phases than training add theirs
// ("ps1_kill_at_final_save_SYNC").
std::string TrialName(const Trial& t) {
  std::string phase;
  if (t.phase != Phase::kTraining) {
    phase = absl::StrCat("at_", PhaseName(t.phase), "_");
  }
  std::string name = absl::StrCat(t.type, t.index, "_", FaultName(t.fault), "_",
                                  phase, t.mode);
  for (char& c : name) {
    if (c == '-' || c == ' ') c = '_';
  }
  return name;
}

class FaultInjectionTest : public ::testing::TestWithParam<Trial> {};

TEST_P(FaultInjectionTest, TheJobEndsAsTheFaultAllows) {
  const Trial& t = GetParam();
  const double baseline = Baseline(t.mode);
  const std::string name = TrialName(t);
  const std::string dir = TempPath("fault_" + name);
  ManualCluster cluster(WriteTestFile(name + ".json", JobConfig(t.mode)), dir,
                        kChiefFlags,
                        // A task left without its peers gives up quickly.
                        {{"worker", {"--recovery_timeout_s=30"}},
                         {"ps", {"--chief_timeout_s=30"}}});
  const std::optional<PhasePoint> point = PhasePointOf(t.phase);
  if (point.has_value()) {
    cluster.SetEnv(point->role, {{"PSFLOW_FAULT_POINTS", point->setting}});
  }
  cluster.StartAll();
  if (point.has_value()) {
    WaitForFaultPoint(cluster, point->task, point->point);
  } else {
    WaitForTraining(dir);
  }
  if (::testing::Test::HasFatalFailure()) return;
  const std::string task = absl::StrCat(t.type, t.index);
  switch (t.fault) {
    case Fault::kKillRestart:
      cluster.KillAndRestart(t.type, t.index, absl::Seconds(1));
      break;
    case Fault::kKill: {
      Subprocess* process = cluster.Latest(task);
      process->Signal(SIGKILL);
      ASSERT_OK(process->Wait(absl::Seconds(10)));
      break;
    }
    case Fault::kStop: {
      Subprocess* process = cluster.Latest(task);
      process->Signal(SIGSTOP);
      absl::SleepFor(absl::Seconds(3));
      process->Signal(SIGCONT);
      break;
    }
  }
  const Outcome outcome =
      Finish(cluster, dir, t.fault == Fault::kKill ? task : "");

  const bool succeeded = outcome.state == "SUCCEEDED";
  std::cout << absl::StrFormat(
                   "FAULT_ROW | %s-%d | %s | %s | %s | %s (exit %d) | %s | "
                   "%.4f | %.1f s%s | %d | %d/%d |",
                   t.type, t.index, FaultName(t.fault), PhaseName(t.phase),
                   t.mode, outcome.state, outcome.chief_exit,
                   outcome.accuracy >= 0
                       ? absl::StrFormat("%.4f", outcome.accuracy)
                       : "none",
                   baseline, outcome.max_exit_seconds,
                   outcome.max_exit_seconds >= 1
                       ? absl::StrCat(" (", outcome.slowest, ")")
                       : "",
                   outcome.lost_steps, outcome.verified, outcome.checkpoints)
            << std::endl;
  std::vector<std::string> problems;
  if ((outcome.chief_exit == 0) != succeeded) {
    problems.push_back("the exit status and result.json disagree");
  }
  if (succeeded != ShouldSucceed(t)) {
    problems.push_back(absl::StrCat("the job ", outcome.state,
                                    "; expected it to ",
                                    ShouldSucceed(t) ? "succeed" : "fail"));
  }
  if (succeeded && !(std::abs(outcome.accuracy - baseline) <= 0.01)) {
    problems.push_back(absl::StrFormat(
        "final accuracy %.4f (none: -1) is not within 1 point of %.4f",
        outcome.accuracy, baseline));
  }
  if (outcome.max_exit_seconds > 30) {
    problems.push_back(absl::StrFormat(
        "%s exited %.1f s after the chief:\n%s", outcome.slowest,
        outcome.max_exit_seconds, outcome.slowest_output));
  }
  // A restore throws away the steps since the newest checkpoint: one
  // interval when the chief saves on time (at each multiple of the
  // interval), more when it saved late, as under heavy load (async
  // training runs on while the chief waits for a CPU: in a CI run beside
  // other work, saves came up to 400 steps late). So what is checked is
  // that every restore took the newest checkpoint saved before it, and,
  // against gross mistakes, three intervals at most (a fault during a save
  // loses that save too).
  if (const std::string stale = StaleRestore(outcome.chief_output);
      !stale.empty()) {
    problems.push_back(stale);
  }
  const int64_t most_lost = 3 * kCheckpointInterval;
  if (outcome.lost_steps > most_lost) {
    problems.push_back(absl::StrCat("a restore threw away ", outcome.lost_steps,
                                    " steps, more than ", most_lost));
  }
  // A job that failed while saving its first checkpoint has none.
  const bool expect_checkpoints = succeeded || t.phase != Phase::kInitialSave;
  if ((expect_checkpoints && outcome.checkpoints == 0) ||
      outcome.verified != outcome.checkpoints) {
    problems.push_back(absl::StrCat(outcome.verified, " of ",
                                    outcome.checkpoints,
                                    " listed checkpoints verify"));
  }
  if (t.known_open != nullptr) {
    if (problems.empty()) {
      ADD_FAILURE() << "this trial passes now: remove its known_open mark ("
                    << t.known_open << ")";
    } else {
      GTEST_SKIP() << "known open: " << t.known_open << "\n"
                   << absl::StrJoin(problems, "\n");
    }
    return;
  }
  for (const std::string& problem : problems) {
    ADD_FAILURE() << problem << "\n" << outcome.chief_output;
  }
}

std::vector<Trial> Trials() {
  std::vector<Trial> trials;
  for (const char* mode : {"ASYNC", "SYNC"}) {
    // A checkpoint being written (ps-1 is inside its save): the initial
    // one, before any worker trains, and the first scheduled one.
    for (Phase phase : {Phase::kInitialSave, Phase::kSave}) {
      for (const auto& [type, index, fault] :
           std::vector<std::tuple<std::string, int, Fault>>{
               {"ps", 1, Fault::kKillRestart},
               {"ps", 1, Fault::kKill},
               {"chief", 0, Fault::kKillRestart}}) {
        Trial trial{type, index, fault, mode};
        trial.phase = phase;
        trials.push_back(trial);
      }
    }
    // The final phases: every worker has trained its last step and waits
    // for the job's end (a lost server's steps are trained again).
    for (Phase phase : {Phase::kFinalSave, Phase::kFinalEvaluation}) {
      for (const auto& [type, index, fault] :
           std::vector<std::tuple<std::string, int, Fault>>{
               {"ps", 1, Fault::kKillRestart},
               {"ps", 1, Fault::kKill},
               {"chief", 0, Fault::kKillRestart},
               {"worker", 1, Fault::kKill},
               {"evaluator", 0, Fault::kKill}}) {
        Trial trial{type, index, fault, mode};
        trial.phase = phase;
        trial.smoke = phase == Phase::kFinalSave && type == "ps" &&
                      fault == Fault::kKillRestart &&
                      std::string(mode) == "ASYNC";
        trials.push_back(trial);
      }
    }
    for (Fault fault : {Fault::kKillRestart, Fault::kKill, Fault::kStop}) {
      for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
               {"ps", 1}, {"worker", 1}, {"chief", 0}, {"evaluator", 0}}) {
        // A chief that never comes back leaves nobody to end the job: its
        // tasks time out on their own (ps --chief_timeout_s, worker
        // --recovery_timeout_s), which the status and recovery tests cover.
        if (type == "chief" && fault == Fault::kKill) continue;
        const bool smoke = fault == Fault::kKillRestart &&
                           (type == "ps" || type == "chief") &&
                           std::string(mode) == "ASYNC";
        const char* known_open = nullptr;
        trials.push_back(Trial{type, index, fault, mode, smoke, known_open});
      }
    }
  }
  if (const char* set = std::getenv("PSFLOW_FAULT_TRIALS");
      set != nullptr && std::string(set) == "smoke") {
    std::vector<Trial> smoke;
    for (const Trial& t : trials) {
      if (t.smoke) smoke.push_back(t);
    }
    return smoke;
  }
  return trials;
}

INSTANTIATE_TEST_SUITE_P(Trials, FaultInjectionTest,
                         ::testing::ValuesIn(Trials()),
                         [](const ::testing::TestParamInfo<Trial>& info) {
                           return TrialName(info.param);
                         });

}  // namespace
}  // namespace psflow
