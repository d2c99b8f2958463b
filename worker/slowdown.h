// Deliberate stragglers for experiments (the worker's --slowdown flags):
// a slowed step sleeps for (factor - 1) times its compute time.
//
//   always:   one worker is slow on every step (a weaker or busier host);
//   rotating: the workers take turns, each slow for one `period` out of
//             every num_workers periods of wall-clock time (transient
//             stragglers: a busy neighbour, a pause), so at any moment
//             exactly one worker is slow. Turns follow the Unix clock, so
//             workers on one host agree on whose turn it is.
#ifndef PSFLOW_WORKER_SLOWDOWN_H_
#define PSFLOW_WORKER_SLOWDOWN_H_

#include "absl/time/time.h"

namespace psflow {

struct Slowdown {
  // 1: full speed.
  double factor = 1;
  // Zero: always slow; otherwise rotating turns of this length.
  absl::Duration period = absl::ZeroDuration();

  // Whether `worker` (of `num_workers`) is slow at `now`.
  bool SlowAt(absl::Time now, int worker, int num_workers) const;

  // How long to sleep after a step that computed for `compute` at `now`.
  absl::Duration Delay(absl::Time now, absl::Duration compute, int worker,
                       int num_workers) const;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_SLOWDOWN_H_
