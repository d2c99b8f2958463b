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
//
// The chief's answers also say when the job has ended. A worker blocked in
// a parameter-server call (a pull from a dead server waits for its RPC
// deadline, a minute) hears it here: the keep-alive remembers the ending
// answer and runs the job-end action (cancelling the client's calls), so
// the worker stops within an interval of the chief's decision instead of
// after the deadline, and knows the outcome even when the chief has exited
// by the time the worker asks.
#ifndef PSFLOW_WORKER_KEEP_ALIVE_H_
#define PSFLOW_WORKER_KEEP_ALIVE_H_

#include <functional>
#include <optional>
#include <thread>

#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class KeepAlive {
 public:
  // Starts the thread; `coordinator` and `clock` must outlive this
  // object. The interval is at least 100ms (tests use tiny heartbeat
  // intervals).
  KeepAlive(CoordinatorClient* coordinator, ProgressReport first,
            absl::Duration interval, Clock* clock = &RealClock());
  // Stops the thread (within one interval plus one report's deadline).
  ~KeepAlive();

  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  // Records a report just sent to the chief: the next resend is one
  // interval after it, and repeats it.
  void Remember(const ProgressReport& report);

  // The report resent when nothing else is (for tests).
  ProgressReport latest() const;

  // Runs `action` (from the keep-alive's thread) after each answer that
  // says the job SUCCEEDED or FAILED, so calls started since are cancelled
  // too. Pass nullptr before what the action uses goes away: this returns
  // only once a running action has finished.
  void OnJobEnd(std::function<void()> action);

  // The chief's answer that said the job SUCCEEDED or FAILED, if one came.
  std::optional<StatusResponse> JobEnded() const;

 private:
  void Loop();

  CoordinatorClient* const coordinator_;
  const absl::Duration interval_;
  Clock* const clock_;
  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ProgressReport latest_ ABSL_GUARDED_BY(mu_);
  absl::Time sent_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<StatusResponse> ended_ ABSL_GUARDED_BY(mu_);
  // Held while the action runs, so OnJobEnd(nullptr) waits for it.
  Mutex action_mu_;
  std::function<void()> on_job_end_ ABSL_GUARDED_BY(action_mu_);
  std::thread thread_;
};

// The report a worker's keep-alive starts with: who it is, and that it
// has not started stepping.
ProgressReport PreparingReport(int worker_index, uint64_t incarnation);

}  // namespace psflow

#endif  // PSFLOW_WORKER_KEEP_ALIVE_H_
