#include "client/psctl/local_command.h"

#include <unistd.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/psctl/local_cluster.h"

namespace psflow {
namespace {

// bazel-bin/client/psctl/psctl -> bazel-bin: where the role binaries are
// built (and the same layout in the relocatable bundle).
std::string DefaultBinDir() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string dir(path, n);
  for (int up = 0; up < 3; ++up) dir = dir.substr(0, dir.rfind('/'));
  return dir;
}

// --straggler: "<worker>:<factor>" gives that worker --slowdown=<factor>;
// "rotate:<factor>:<ms>" gives every worker --slowdown=<factor> and
// --slowdown_period_ms=<ms> (turns, one slow worker at a time).
absl::Status ParseStraggler(const std::string& value, int num_workers,
                            std::map<int, std::vector<std::string>>& flags) {
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  double factor = 0;
  int worker = -1, period_ms = 0;
  const bool rotate = parts.size() == 3 && parts[0] == "rotate" &&
                      absl::SimpleAtod(parts[1], &factor) &&
                      absl::SimpleAtoi(parts[2], &period_ms) && period_ms > 0;
  const bool one = parts.size() == 2 && absl::SimpleAtoi(parts[0], &worker) &&
                   absl::SimpleAtod(parts[1], &factor) && worker >= 0 &&
                   worker < num_workers;
  if ((!rotate && !one) || !(factor >= 1) || factor > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler=", value, " is not <worker>:<factor> (a worker in 0..",
        num_workers - 1,
        ") or rotate:<factor>:<milliseconds>, with a factor in [1, 1000]; "
        "e.g. --straggler=3:4 or --straggler=rotate:4:200"));
  }
  const std::string slowdown = absl::StrCat("--slowdown=", factor);
  if (one) {
    flags[worker].push_back(slowdown);
    return absl::OkStatus();
  }
  for (int w = 0; w < num_workers; ++w) {
    flags[w].push_back(slowdown);
    flags[w].push_back(absl::StrCat("--slowdown_period_ms=", period_ms));
  }
  return absl::OkStatus();
}

class LocalCommand : public Subcommand {
 public:
  LocalCommand()
      : Subcommand(
            "local", {},
            "psctl local [--job=<file>] [--ps=N] [--workers=M] [--evaluator]\n"
            "            [--chief] [--dir=<dir>] [--device=auto|cpu|cuda]\n"
            "            [--shared_memory=false] [--shared_memory_ring=false]\n"
            "            [--metrics] [--tls=false]\n"
            "            [--tokens=false]\n"
            "            [--straggler=<worker>:<factor>|rotate:<factor>:<ms>]",
            "Run a whole cluster on 127.0.0.1 and exit with the job's "
            "result.") {
    options_.job_path = "configs/fashion_mnist_mlp.json";
    options_.dir = "/tmp/psflow-local";
    FlagSet& flags = mutable_flags();
    flags.AddString("job", &options_.job_path, "the job config");
    flags.AddInt("ps", &options_.num_ps, "parameter servers");
    flags.AddInt("workers", &options_.num_workers, "workers");
    flags.AddBool("evaluator", &options_.evaluator, "run an evaluator");
    flags.AddBool("chief", &options_.chief,
                  "run a separate chief (otherwise worker 0 is the chief)");
    flags.AddString("dir", &options_.dir,
                    "directory for logs, TF_CONFIGs and result.json: this "
                    "user's own, writable by no one else (a new one is made "
                    "0700)");
    flags.AddString("bin_dir", &options_.bin_dir,
                    "directory holding ps/, worker/, chief/, evaluator/ "
                    "binaries; defaults to the one psctl was built into");
    flags.AddString("device", &options_.device, "worker device");
    flags.AddBool("shared_memory", &options_.shared_memory,
                  "let workers and the evaluator reach the servers through "
                  "shared memory (false: loopback TCP, as between hosts)");
    flags.AddBool("shared_memory_ring", &options_.shared_memory_ring,
                  "with shared memory, carry pulls and pushes through a call "
                  "ring in it instead of a gRPC call each");
    flags.AddInt("timeout_s", &timeout_s_,
                 "give up after this many seconds (0: no limit)");
    flags.AddInt("stall_timeout_s", &stall_timeout_s_,
                 "give up when the job makes no progress (state, global "
                 "step) for this many seconds (0: never); unlike "
                 "--timeout_s it does not depend on the machine's speed");
    flags.AddString("checkpoint_dir", &options_.checkpoint_dir,
                    "checkpoint directory; kept between runs, so a second run "
                    "resumes (default <dir>/checkpoints, emptied at start)");
    flags.AddBool("metrics", &options_.metrics,
                  "every task serves Prometheus metrics on a free port; the "
                  "targets go to <dir>/prometheus_targets.json (file_sd)");
    flags.AddBool("tls", &options_.tls,
                  "mutual TLS between the tasks, with a CA and certificates "
                  "made for this run in <dir>/tls (--tls=false: plaintext)");
    flags.AddBool("tokens", &options_.tokens,
                  "fresh job tokens for this run in <dir>/tokens, so no "
                  "other local user can steer the job (--tokens=false: "
                  "none)");
    flags.AddString("straggler", &straggler_,
                    "experiments: <worker>:<factor> slows that worker down "
                    "(each step takes factor times its compute time), e.g. "
                    "3:4; rotate:<factor>:<ms> slows the workers in turns of "
                    "<ms> milliseconds, one at a time");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    LocalClusterOptions options = options_;
    if (options.bin_dir.empty()) options.bin_dir = DefaultBinDir();
    options.timeout = absl::Seconds(timeout_s_);
    options.stall_timeout = absl::Seconds(stall_timeout_s_);
    if (!straggler_.empty()) {
      absl::Status parsed =
          ParseStraggler(straggler_, options.num_workers, options.worker_flags);
      if (!parsed.ok()) {
        err << "psctl local: " << parsed.message() << "\n";
        return kExitUsage;
      }
    }
    absl::StatusOr<int> code = RunLocalCluster(options, out);
    if (!code.ok()) {
      err << "psctl local: " << code.status().message() << "\n";
      return kExitUsage;
    }
    return *code;
  }

 private:
  LocalClusterOptions options_;
  std::string straggler_;
  int timeout_s_ = 0;
  int stall_timeout_s_ = 0;
};

}  // namespace

std::unique_ptr<Subcommand> NewLocalCommand() {
  return std::make_unique<LocalCommand>();
}

}  // namespace psflow
