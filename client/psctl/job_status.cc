#include "client/psctl/job_status.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/grpc_coordinator_client.h"
#include "client/health_check.h"
#include "client/psctl/tls_flags.h"

namespace psflow {
namespace {

// Probes every (task, address) at once.
std::map<std::string, JobLook::Probe> ProbeAll(
    const std::vector<std::pair<std::string, std::string>>& tasks,
    const TransportSecurity& security, absl::Duration timeout) {
  std::vector<absl::Status> results(tasks.size());
  std::vector<std::thread> threads;
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t i = 0; i < tasks.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = CheckHealth(tasks[i].second, deadline, security);
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, JobLook::Probe> probes;
  for (size_t i = 0; i < tasks.size(); ++i) {
    probes[tasks[i].first] = JobLook::Probe{tasks[i].second, results[i]};
  }
  return probes;
}

std::string Seen(double seconds) {
  if (seconds < 0) return "never";
  if (seconds < 1) return "now";
  if (seconds < 120) return absl::StrFormat("%.0fs ago", seconds);
  if (seconds < 7200) return absl::StrFormat("%.0fm ago", seconds / 60);
  return absl::StrFormat("%.1fh ago", seconds / 3600);
}

std::string Bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f%s", bytes, units[unit])
                   : absl::StrFormat("%.1f%s", bytes, units[unit]);
}

std::string Duration(double seconds) {
  if (seconds < 1) return "0s";
  return absl::FormatDuration(
      absl::Trunc(absl::Seconds(seconds), absl::Seconds(1)));
}

// A text table whose columns are as wide as their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) {
        line += std::string(widths[c] - row[c].size() + 2, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

bool IsWorker(const TaskView& v) { return v.task().rfind("worker-", 0) == 0; }
bool IsServer(const TaskView& v) { return v.task().rfind("ps-", 0) == 0; }

// What a probe adds to a task the chief has not heard from.
// Why there is no description: refused (credentials) or no answer.
std::string ChiefProblem(const absl::Status& status, bool with_tls) {
  const bool refused = status.code() == absl::StatusCode::kUnauthenticated ||
                       status.code() == absl::StatusCode::kPermissionDenied;
  // A chief lets psctl (admin) describe the job; another task refuses it.
  const bool not_the_chief =
      status.code() == absl::StatusCode::kPermissionDenied &&
      absl::StrContains(status.message(), "DescribeJob is for");
  return absl::StrCat(
      refused ? "the chief refused psctl: " : "the chief does not answer: ",
      status.message(),
      not_the_chief
          ? "; this address is not the chief's: pass the chief's (TF_CONFIG's "
            "chief, or worker 0 in a job without one) with --chief, or the "
            "job's --tf_config"
          : CredentialHint(status, with_tls));
}

std::string ProbeNote(const JobLook& look, const std::string& task) {
  auto it = look.probes.find(task);
  if (it == look.probes.end()) return "";
  return it->second.status.ok()
             ? "its port answers (the process is up)"
             : absl::StrCat("its port does not answer (",
                            it->second.status.message(), ")");
}

std::vector<std::string> Row(const JobLook& look, const TaskView& v) {
  const bool worker = IsWorker(v), server = IsServer(v);
  std::string step, rate, bytes, memory, stale;
  if (worker && v.state() != TaskView::MISSING) {
    step = absl::StrCat(v.local_steps());
    rate = absl::StrFormat("%.0f", v.examples_per_sec());
  }
  if (server && v.seconds_since_contact() >= 0 && v.variable_bytes() > 0) {
    bytes = absl::StrCat(Bytes(v.bytes_per_sec()), "/s");
    memory = v.resident_bytes() > 0 ? Bytes(v.resident_bytes()) : "";
    stale = absl::StrCat(v.stale_gradients_dropped());
  }
  std::string note = v.detail();
  if (worker && v.state() == TaskView::TRAINING && v.local_steps() > 0) {
    note = absl::StrFormat("loss %.4f%s%s", v.loss(), note.empty() ? "" : "; ",
                           note);
  }
  if (v.task().rfind("evaluator-", 0) == 0 && v.global_step() > 0) {
    note = absl::StrFormat("accuracy %.4f, loss %.4f (%s)", v.accuracy(),
                           v.loss(), note);
  }
  if (std::string probe = ProbeNote(look, v.task()); !probe.empty()) {
    note = note.empty() ? probe : absl::StrCat(note, "; ", probe);
  }
  return {v.task(),
          v.address(),
          TaskView::State_Name(v.state()),
          Seen(v.seconds_since_contact()),
          step,
          rate,
          bytes,
          memory,
          stale,
          note};
}

}  // namespace

JobLook LookAtJob(const StatusTarget& target, absl::Duration timeout) {
  JobLook look;
  look.when = absl::Now();
  look.with_tls = !target.security.certificate_pem.empty();
  // With a TF_CONFIG the coordinating task is known, and only its
  // certificate answers (psctl's admin token goes with every call).
  GrpcCoordinatorClient chief(
      target.chief_address, absl::StrCat("the chief at ", target.chief_address),
      target.security, std::nullopt,
      target.tf_config.has_value() ? target.tf_config->ChiefTask().ToString()
                                   : std::string());
  absl::StatusOr<JobDescription> description = chief.DescribeJob(timeout);
  std::vector<std::pair<std::string, std::string>> to_probe;
  if (description.ok()) {
    for (const TaskView& v : description->tasks()) {
      if (v.state() == TaskView::MISSING && !v.address().empty()) {
        to_probe.emplace_back(v.task(), v.address());
      }
    }
    look.description = *std::move(description);
  } else {
    look.chief = description.status();
    if (target.tf_config.has_value()) {
      for (const auto& [task, address] : target.tf_config->cluster.Tasks()) {
        to_probe.emplace_back(task.ToString(), address);
      }
    }
  }
  look.probes = ProbeAll(to_probe, target.security, timeout);
  return look;
}

Health JudgeHealth(const JobLook& look) {
  Health health;
  auto problem = [&health](std::string what) {
    health.healthy = false;
    health.problems.push_back(std::move(what));
  };
  if (!look.description.has_value()) {
    problem(absl::StrCat(ChiefProblem(look.chief, look.with_tls),
                         look.last_seen.empty()
                             ? ""
                             : absl::StrCat(" (last seen: ", look.last_seen,
                                            "; the chief's result file and "
                                            "log tell how it ended)")));
    std::vector<std::string> running;
    for (const auto& [task, probe] : look.probes) {
      if (probe.status.ok()) running.push_back(task);
    }
    if (!look.probes.empty()) {
      problem(running.empty()
                  ? "no task of the job answers: the job is not running "
                    "(it ended, or never started)"
                  : absl::StrCat("still running without a chief (not "
                                 "exited): ",
                                 absl::StrJoin(running, ", ")));
    }
    return health;
  }
  const JobDescription& d = *look.description;
  const JobState state = d.status().state();
  if (state == FAILED) {
    problem(absl::StrCat("the job failed: ", d.status().message()));
  }
  for (const TaskView& v : d.tasks()) {
    switch (v.state()) {
      case TaskView::LOST:
      case TaskView::FAILED:
      case TaskView::UNREACHABLE:
        problem(absl::StrCat(v.task(), " is ", TaskView::State_Name(v.state()),
                             ": ", v.detail()));
        break;
      case TaskView::MISSING:
        // Missing tasks are expected while the job starts; once it trains,
        // a worker or server that never came is a problem.
        if (!d.starting() && (IsWorker(v) || IsServer(v)) &&
            state != SUCCEEDED && state != FAILED) {
          problem(absl::StrCat(v.task(), " never joined"));
        }
        break;
      default:
        break;
    }
  }
  return health;
}

bool JobOver(const JobLook& look) {
  if (!look.description.has_value()) return true;
  const JobState state = look.description->status().state();
  return state == SUCCEEDED || state == FAILED;
}

bool WatchEnds(const JobLook& look, int unanswered) {
  if (!look.description.has_value()) {
    return unanswered >= kWatchUnansweredLooks;
  }
  return JobOver(look);
}

std::string RenderJobLook(const JobLook& look, const Health& health) {
  std::string out;
  if (look.description.has_value()) {
    const JobDescription& d = *look.description;
    const StatusResponse& s = d.status();
    absl::StrAppend(&out, "job ",
                    d.job_name().empty() ? "(unnamed)" : d.job_name(), " (",
                    UpdateMode_Name(d.mode()), "): ", JobState_Name(s.state()));
    if (s.total_steps() > 0) {
      absl::StrAppend(
          &out, absl::StrFormat(", global step %d of %d (%.0f%%)",
                                s.global_step(), s.total_steps(),
                                100.0 * s.global_step() / s.total_steps()));
    }
    absl::StrAppend(&out, ", chief up ", Duration(d.seconds_since_start()),
                    "\n");
    if (!s.message().empty()) absl::StrAppend(&out, "  ", s.message(), "\n");
    absl::StrAppend(&out, "chief: ", d.activity(),
                    d.starting() ? " (starting up)" : "", "\n");
    std::vector<std::string> missing;
    for (const TaskView& v : d.tasks()) {
      if (v.state() == TaskView::MISSING) missing.push_back(v.task());
    }
    if (!missing.empty()) {
      absl::StrAppend(&out, "missing: ", absl::StrJoin(missing, ", "), "\n");
    }
    std::vector<std::vector<std::string>> rows = {
        {"TASK", "ADDRESS", "STATE", "LAST SEEN", "STEPS", "EXAMPLES/S",
         "BYTES/S", "MEMORY", "STALE DROPS", "NOTE"}};
    for (const TaskView& v : d.tasks()) rows.push_back(Row(look, v));
    absl::StrAppend(&out, "\n", Table(rows));
  } else {
    absl::StrAppend(&out, ChiefProblem(look.chief, look.with_tls), "\n");
    if (!look.probes.empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"TASK", "ADDRESS", "PORT"}};
      for (const auto& [task, probe] : look.probes) {
        rows.push_back({task, probe.address,
                        probe.status.ok()
                            ? "answers (still running)"
                            : absl::StrCat("does not answer (",
                                           probe.status.message(), ")")});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
  }
  absl::StrAppend(&out, "\n", health.healthy ? "healthy" : "UNHEALTHY", "\n");
  for (const std::string& p : health.problems) {
    absl::StrAppend(&out, "  - ", p, "\n");
  }
  return out;
}

}  // namespace psflow
