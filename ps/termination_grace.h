// SIGTERM/SIGINT to a parameter server. Kubernetes signals every pod of a
// job it stops at once, and Ctrl-C every process of `psctl local`, while
// the chief saves a checkpoint of the current step before stopping (chief
// --preemption_save_timeout_s): a server of a running job keeps serving for
// `grace` so that save can read it, and stops when the chief's shutdown
// comes or the grace runs out. A second signal, or a server no job has
// configured yet, stops at once.
#ifndef PSFLOW_PS_TERMINATION_GRACE_H_
#define PSFLOW_PS_TERMINATION_GRACE_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace psflow {

class TerminationGrace {
 public:
  // `request_shutdown` stops the server with a reason (the server's
  // RequestShutdown); `on_grace` tells it the grace began (its Stats say
  // so: MarkTerminating). Neither is called after Stopped().
  explicit TerminationGrace(
      std::function<void(const std::string& reason)> request_shutdown,
      std::function<void()> on_grace = [] {}, Clock* clock = &RealClock())
      : request_shutdown_(std::move(request_shutdown)),
        on_grace_(std::move(on_grace)),
        clock_(clock) {}
  TerminationGrace(const TerminationGrace&) = delete;
  TerminationGrace& operator=(const TerminationGrace&) = delete;
  // Waits for a grace timer still running.
  ~TerminationGrace();

  // From the signal thread, with "SIGINT" or "SIGTERM"; `in_use`: a chief
  // has configured the server.
  void OnSignal(const std::string& signal, absl::Duration grace, bool in_use);

  // The server stopped (for whatever reason): the timer does nothing more.
  void Stopped();

 private:
  void Shutdown(const std::string& reason);

  const std::function<void(const std::string&)> request_shutdown_;
  const std::function<void()> on_grace_;
  Clock* const clock_;
  Mutex mu_;
  int signals_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_PS_TERMINATION_GRACE_H_
