// Keeps the chief's hold on its parameter servers alive and its view of
// them fresh: asks every server for its Stats at least once per interval,
// from a thread of its own, whatever the chief is doing meanwhile (waiting
// for workers, restoring a checkpoint, waiting for the final evaluation).
// The servers follow one chief at a time and let another take over once
// theirs has been silent (ps/chief_fence.h), so a chief busy elsewhere must
// still call them. Every answer goes on the server board (psctl status).
//
// The supervisor's own checks call Poll(); the thread skips a round that
// such a check just made, so the servers are asked once per interval.
// Thread-safe.
#ifndef PSFLOW_CHIEF_SERVER_WATCH_H_
#define PSFLOW_CHIEF_SERVER_WATCH_H_

#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/server_board.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "proto/ps.pb.h"

namespace psflow {

class ServerWatch {
 public:
  // `client` and `board` must outlive the watch. Starts the thread.
  ServerWatch(ParameterClient* client, ServerBoard* board,
              absl::Duration interval = absl::Seconds(1),
              Clock* clock = &RealClock());
  // Stops the thread (waits for a round in progress, at most 2 s).
  ~ServerWatch();

  // Asks every server now (2 s bound each) and records the answers; in
  // server order.
  std::vector<absl::StatusOr<StatsResponse>> Poll();

 private:
  void Run();

  ParameterClient* const client_;
  ServerBoard* const board_;
  const absl::Duration interval_;
  Clock* const clock_;
  Mutex mu_;
  absl::Time last_poll_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_CHIEF_SERVER_WATCH_H_
