// The chief's recovery duties while training runs:
//
//  - watching the parameter servers: a server that stops answering, or
//    answers holding fewer variables than it was given (it restarted), is
//    lost, and its state with it; one that says it is shutting down
//    (SIGTERM) is about to be;
//  - pausing the workers, waiting (bounded) for every server, recreating
//    the variables, restoring a checkpoint onto all servers and resuming
//    with a new model generation: what a lost server and `psctl ckpt
//    restore` both need.
#ifndef PSFLOW_CHIEF_RECOVERY_H_
#define PSFLOW_CHIEF_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/job_coordinator.h"
#include "client/ps_client.h"
#include "proto/coordinator.pb.h"

namespace psflow {

// Variables each server holds under the placement (for the health check).
std::vector<int64_t> ExpectedVariablesPerServer(const Placement& placement);

// OK when every server answered (`stats`, in server order) holding its
// variables; otherwise Unavailable naming the first server that is lost.
// When none is lost but one is shutting down (it received SIGTERM and
// serves on only for its grace, StatsResponse.terminating), Unavailable
// with that server's index attached: ServerLeaving() reads it.
absl::Status CheckParameterServers(
    const std::vector<absl::StatusOr<StatsResponse>>& stats,
    const std::vector<int64_t>& expected);

// The index of the server shutting down that CheckParameterServers
// reported, if that is what `status` says.
std::optional<int> ServerLeaving(const absl::Status& status);

// OK once every parameter server answers its health check; otherwise
// Unavailable naming each one missing at `deadline`.
using AwaitServersFunction = std::function<absl::Status(absl::Time deadline)>;

struct RecoveryOptions {
  AwaitServersFunction await_servers;
  const JobSpec* spec = nullptr;
  JobCoordinator* coordinator = nullptr;
  ParameterClient* client = nullptr;
  // How long to wait for workers to pause (they report about once a
  // second), and for lost servers to come back.
  absl::Duration pause_timeout = absl::Seconds(15);
  absl::Duration ps_return_timeout = absl::Minutes(5);
};

// Pauses training (`why` is what workers are told), waits for the servers,
// recreates the variables and restores `checkpoint` onto all servers, then
// resumes from its step. The job stays paused on error; the caller decides
// whether that fails the job or resumes (JobCoordinator::Resume).
absl::StatusOr<int64_t> PauseAndRestore(const RecoveryOptions& options,
                                        const std::string& why,
                                        const std::string& checkpoint);

// What a restore to `restored` throws away when the job had reached
// `reached` (capped at its total): " (the job had reached R: N steps to
// train again)", the form the logs and the fault harness use; "" when the
// reached step is unknown (0).
std::string TrainAgainNote(int64_t reached, int64_t restored,
                           int64_t total_steps);

// Restores the newest intact checkpoint that `directory` keeps, through
// `restore` (given its path; RestoreCheckpoint underneath). A checkpoint
// whose restore fails with DataLoss before any server changed (a truncated
// or corrupt file; RestoreCheckpoint checks every file first), or whose
// directory is gone, gives way to the next older kept one. Once one is
// restored, the ones skipped are logged as errors and set aside
// (SetAsideCheckpoints: renamed "<name>.damaged", no longer listed, so a
// later save of their step writes a new checkpoint). NotFound when
// `directory` keeps no checkpoint. When none can be restored, the newest
// one's error, naming the older ones that failed too; any other error
// (a server lost, a checkpoint of another model) is returned at once.
struct RestoredCheckpoint {
  std::string path;
  int64_t step = 0;
};
using RestorePathFunction =
    std::function<absl::StatusOr<int64_t>(const std::string& path)>;
absl::StatusOr<RestoredCheckpoint> RestoreNewestIntactCheckpoint(
    const std::string& directory, const RestorePathFunction& restore);

// Recovers the model after a server was lost (`lost` says which): restores
// the newest intact checkpoint in `directory` (RestoreNewestIntactCheckpoint)
// through `restore` (PauseAndRestore, or a test's) with `why` as the
// reason the workers are told; returns the step resumed at. Unavailable when no
// checkpoint was saved yet; a failed restore is its error, prefixed "recovery
// failed: ".
using RestoreFunction = std::function<absl::StatusOr<int64_t>(
    const std::string& why, const std::string& checkpoint)>;
absl::StatusOr<int64_t> RecoverFromNewestCheckpoint(
    const absl::Status& lost, const std::string& directory,
    const std::string& why, const RestoreFunction& restore);

}  // namespace psflow

#endif  // PSFLOW_CHIEF_RECOVERY_H_
