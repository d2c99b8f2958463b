#include "client/psctl/status_command.h"

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/psctl/job_status.h"
#include "client/psctl/tls_flags.h"
#include "common/clock.h"
#include "common/tf_config_loader.h"

namespace psflow {
namespace {

class StatusCommand : public Subcommand {
 public:
  StatusCommand()
      : Subcommand(
            "status", {},
            "psctl status [--chief=HOST:PORT | --tf_config=<file or JSON>]\n"
            "             [--watch] [--interval=2] [--timeout=5]",
            "Every task of a running job: its state, when it was last seen,\n"
            "steps and examples/s (workers), bytes/s, memory and stale drops\n"
            "(parameter servers), what it waits for. During start-up it names\n"
            "the missing tasks; when the chief is gone it names the tasks "
            "that\n"
            "still answer. Exits 0 when the job is healthy or succeeded, 1 "
            "when\n"
            "it is not.") {
    FlagSet& flags = mutable_flags();
    flags.AddString("chief", &chief_,
                    "the chief's HOST:PORT (worker 0's when the job has no "
                    "chief task)");
    flags.AddString(
        "tf_config", &tf_config_,
        "the job's TF_CONFIG (any task's) as inline JSON or a path to a JSON "
        "file, instead of --chief; defaults to the TF_CONFIG environment "
        "variable. With it, every task is probed when the chief does not "
        "answer");
    flags.AddBool("watch", &watch_,
                  "refresh every --interval seconds until the job ends");
    flags.AddInt("interval", &interval_s_, "seconds between refreshes");
    flags.AddInt("timeout", &timeout_s_,
                 "seconds to wait for each answer (the chief's, each probe)");
    AddTlsFlags(flags, &tls_);
  }

  int Run(const std::vector<std::string>&, std::ostream& out,
          std::ostream& err) override {
    if (interval_s_ < 1 || timeout_s_ < 1) {
      err << "psctl status: --interval and --timeout must be at least 1 "
             "(seconds)\n";
      return kExitUsage;
    }
    StatusTarget target;
    std::string rpc_layer;
    if (!chief_.empty()) {
      target.chief_address = chief_;
    } else {
      absl::StatusOr<LoadedTfConfig> loaded =
          LoadTfConfigFromFlagOrEnvironment(tf_config_);
      if (!loaded.ok()) {
        err << "psctl status: " << loaded.status().message()
            << " (or name the chief with --chief=HOST:PORT)\n";
        return kExitUsage;
      }
      absl::StatusOr<std::string> chief = loaded->config.ChiefAddress();
      if (!chief.ok()) {
        err << "psctl status: " << chief.status().message()
            << " (or name the chief with --chief=HOST:PORT)\n";
        return kExitUsage;
      }
      target.tf_config = loaded->config;
      target.chief_address = *std::move(chief);
      rpc_layer = loaded->config.rpc_layer;
    }
    std::string found;
    const SecuritySettings settings =
        WithCredentialsBeside(tls_, tf_config_, &found);
    if (!found.empty()) {
      err << "psctl status: using the job's credentials beside " << tf_config_
          << ": " << found << "\n";
    }
    absl::StatusOr<TransportSecurity> security =
        PsctlTransportSecurity(settings, rpc_layer);
    if (!security.ok()) {
      err << "psctl status: " << security.status().message() << "\n";
      return kExitUsage;
    }
    target.security = *security;
    // Frames replace each other on a terminal; elsewhere (a log, a pipe)
    // they follow each other.
    const bool terminal = &out == &std::cout && isatty(fileno(stdout));
    const absl::Duration timeout = absl::Seconds(timeout_s_);
    std::optional<JobLook> previous;  // the latest look the chief answered
    int unanswered = 0;               // looks in a row the chief missed
    for (bool first = true;; first = false) {
      JobLook look = LookAtJob(target, timeout);
      unanswered = look.description.has_value() ? 0 : unanswered + 1;
      if (look.description.has_value()) {
        previous = look;
      } else if (previous.has_value()) {
        const StatusResponse& s = previous->description->status();
        look.last_seen =
            absl::StrCat(JobState_Name(s.state()), " at global step ",
                         s.global_step(), " of ", s.total_steps(), ", ",
                         absl::FormatDuration(absl::Trunc(
                             look.when - previous->when, absl::Seconds(1))),
                         " earlier");
      }
      const Health health = JudgeHealth(look);
      if (watch_ && terminal) {
        out << "\033[H\033[2J";
      } else if (!first) {
        out << "\n";
      }
      if (watch_) {
        out << absl::FormatTime("%Y-%m-%d %H:%M:%S", look.when,
                                absl::LocalTimeZone())
            << "\n";
      }
      out << RenderJobLook(look, health);
      out.flush();
      if (!watch_ || WatchEnds(look, unanswered))
        return health.healthy ? kExitOk : kExitFailed;
      RealClock().SleepFor(absl::Seconds(interval_s_));
    }
  }

 private:
  std::string chief_;
  std::string tf_config_;
  bool watch_ = false;
  int interval_s_ = 2;
  int timeout_s_ = 5;
  SecuritySettings tls_;
};

}  // namespace

std::unique_ptr<Subcommand> NewStatusCommand() {
  return std::make_unique<StatusCommand>();
}

}  // namespace psflow
