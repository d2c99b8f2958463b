// Keeps a worker among the chief's live tasks from the moment it registers
// until it stops: whenever no progress report went to the chief for an
// interval, a background thread resends the latest one.
//
// Reports come from whoever talks to the chief (the training loop, its
// recovery waits); Remember() records each one sent. Before the loop
// starts, the first report says the worker is still preparing (loading its
// data, building its model, connecting to the servers), which can take
// longer than the chief's heartbeat timeout on a big shard or a loaded
// machine. The chief does not wait for a preparing worker to pause.
#ifndef PSFLOW_WORKER_KEEP_ALIVE_H_
#define PSFLOW_WORKER_KEEP_ALIVE_H_

#include <thread>

#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/mutex.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class KeepAlive {
 public:
  // Starts the thread; `coordinator` must outlive this object. The
  // interval is at least 100ms (tests use tiny heartbeat intervals).
  KeepAlive(CoordinatorClient* coordinator, ProgressReport first,
            absl::Duration interval);
  // Stops the thread (within one interval plus one report's deadline).
  ~KeepAlive();

  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  // Records a report just sent to the chief: the next resend is one
  // interval after it, and repeats it.
  void Remember(const ProgressReport& report);

  // The report resent when nothing else is (for tests).
  ProgressReport latest() const;

 private:
  void Loop();

  CoordinatorClient* const coordinator_;
  const absl::Duration interval_;
  mutable Mutex mu_;
  ProgressReport latest_ ABSL_GUARDED_BY(mu_);
  absl::Time sent_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Notification stop_;
  std::thread thread_;
};

// The report a worker's keep-alive starts with: who it is, and that it
// has not started stepping.
ProgressReport PreparingReport(int worker_index, uint64_t incarnation);

}  // namespace psflow

#endif  // PSFLOW_WORKER_KEEP_ALIVE_H_
