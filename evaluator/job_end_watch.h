// Lets an evaluator that is blocked in a pull notice that the job ended.
// An evaluation pulls the model from the parameter servers; when a server
// dies for good or a sync step never comes, that pull waits until its RPC
// deadline (a minute), long after the chief ended the job. A JobEndWatch
// asks the chief about once an `interval` on its own thread and cancels
// the client's calls in flight once the job succeeded or failed, or the
// chief has been silent for `silence`; the evaluator's loop then asks the
// chief itself and ends as the job did.
//
// While the chief is silent, the watch also asks every parameter server
// for its Stats (before cancelling anything, so its own calls are not
// cancelled): when none answers either, the job ended or the cluster is
// gone, and the loop need not wait out its whole chief timeout
// (ServersSilent()).
//
// Thread-safe; the coordinator and client must outlive it.
#ifndef PSFLOW_EVALUATOR_JOB_END_WATCH_H_
#define PSFLOW_EVALUATOR_JOB_END_WATCH_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>

#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/ps_client.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "proto/coordinator.pb.h"

namespace psflow {

class JobEndWatch {
 public:
  JobEndWatch(CoordinatorClient* coordinator, ParameterClient* client,
              absl::Duration interval, absl::Duration silence,
              Clock* clock = &RealClock());
  JobEndWatch(const JobEndWatch&) = delete;
  JobEndWatch& operator=(const JobEndWatch&) = delete;
  // Stops the thread (within an interval).
  ~JobEndWatch();

  // How many times it cancelled the client's calls: an evaluation that
  // failed while this grew failed because of it.
  int64_t cancellations() const { return cancellations_.load(); }

  // The chief's answer that said the job SUCCEEDED or FAILED, if one came:
  // the evaluator's loop, busy evaluating when it came, may find the chief
  // already gone when it asks next.
  std::optional<StatusResponse> JobEnded() const;

  // True when the latest look, made while the chief was silent for
  // `silence`, found no parameter server answering; false again once the
  // chief or any server answers.
  bool ServersSilent() const { return servers_silent_.load(); }

 private:
  void Watch();

  CoordinatorClient* const coordinator_;
  ParameterClient* const client_;
  const absl::Duration interval_;
  const absl::Duration silence_;
  Clock* const clock_;
  std::atomic<int64_t> cancellations_{0};
  std::atomic<bool> servers_silent_{false};
  mutable Mutex mu_;
  std::optional<StatusResponse> ended_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_EVALUATOR_JOB_END_WATCH_H_
