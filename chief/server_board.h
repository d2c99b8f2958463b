// What the chief last learned about each parameter server, for `psctl
// status` (JobCoordinator::Describe): whether it answered, when, and its
// counters from the chief's latest two Stats samples (so rates are real
// rates over the chief's check interval).
//
// Written by the chief's start-up probes, its once-a-second server check
// and its shutdown; read by the Coordinator service. Thread-safe.
#ifndef PSFLOW_CHIEF_SERVER_BOARD_H_
#define PSFLOW_CHIEF_SERVER_BOARD_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "proto/coordinator.pb.h"
#include "proto/ps.pb.h"

namespace psflow {

class ServerBoard {
 public:
  // Servers by index, with their TF_CONFIG addresses.
  explicit ServerBoard(std::map<int, std::string> addresses);

  // A health probe's outcome (start-up).
  void RecordProbe(int index, const absl::Status& status, absl::Time now);
  // One Stats round, in server order: the TF_CONFIG's "ps" tasks by
  // ascending index (the chief's server check).
  void RecordStats(const std::vector<absl::StatusOr<StatsResponse>>& stats,
                   absl::Time now);
  // The chief told every server to stop.
  void RecordShutdown(const absl::Status& status, absl::Time now);

  // One row per server, in index order.
  std::vector<TaskView> Views(absl::Time now) const;

 private:
  struct Server {
    std::string address;
    std::optional<absl::Time> last_answer;
    absl::Status last_error;  // of the latest attempt; OK when it answered
    std::optional<StatsResponse> stats, previous_stats;
    absl::Time stats_time, previous_stats_time;
    bool shut_down = false;
  };
  mutable Mutex mu_;
  std::map<int, Server> servers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_SERVER_BOARD_H_
