#include "client/psctl/config_command.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "client/psctl/job_config_check.h"

namespace psflow {
namespace {

class ConfigCheckCommand : public Subcommand {
 public:
  explicit ConfigCheckCommand(std::function<HostMemory()> host)
      : Subcommand(
            "config check", {"<job.json>"},
            "psctl config check <job.json> [--ps=1] [--workers=1]",
            "Check a job config without starting anything, as the chief, "
            "the\n"
            "workers and the evaluator will: parsing and validation, the "
            "data\n"
            "files (there, complete, of one split, of the model's shape), "
            "the\n"
            "model on that data, its memory against "
            "training.worker_memory_mib\n"
            "and this host, its sizes on --ps servers and --workers workers.\n"
            "Prints \"OK: <the job>\", or each problem on its own line "
            "(exit 1).") {
    host_ = std::move(host);
    FlagSet& flags = mutable_flags();
    flags.AddInt("ps", &options_.num_ps,
                 "the parameter servers the job would run on");
    flags.AddInt("workers", &options_.num_workers,
                 "the workers the job would run on (every one's shard must "
                 "fill a batch)");
  }

  int Run(const std::vector<std::string>& arguments, std::ostream& out,
          std::ostream& err) override {
    if (options_.num_ps < 1 || options_.num_workers < 1) {
      err << "psctl config check: --ps=" << options_.num_ps
          << " --workers=" << options_.num_workers
          << ": a job needs at least one of each\n";
      return kExitUsage;
    }
    options_.host = host_();
    const JobConfigReport report = CheckJobConfigFile(arguments[0], options_);
    if (!report.problems.empty()) {
      for (const std::string& problem : report.problems) {
        err << problem << "\n";
      }
      return kExitFailed;
    }
    out << "OK: " << report.summary << "\n";
    for (const std::string& detail : report.details) out << detail << "\n";
    return kExitOk;
  }

 private:
  std::function<HostMemory()> host_;
  JobConfigCheckOptions options_;
};

}  // namespace

std::unique_ptr<Subcommand> NewConfigCheckCommand(
    std::function<HostMemory()> host) {
  return std::make_unique<ConfigCheckCommand>(std::move(host));
}

}  // namespace psflow
