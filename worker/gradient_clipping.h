// Gradient clipping on a worker (training.gradient_clipping in the job
// config): its batch's gradients, dense and rows, limited before they are
// pushed, as Keras' clipnorm / clipvalue / global_clipnorm do.
//
//   GradientClipper clipper(config.training().gradient_clipping());
//   ... backward finished variable v: clipper.ClipOne(grads[v]);
//   ... the step's end: clipper.ClipRest(grads, rows);
//
// Per-tensor clipping (clip_value, then clip_norm) is done per span as
// soon as it is final, so a SYNC worker may push early groups; a global
// norm needs every gradient first (streams() is then false). A gradient
// that holds NaN or Inf is left as it is: the servers refuse it and say
// why, where clipping would hide the model's divergence.
#ifndef PSFLOW_WORKER_GRADIENT_CLIPPING_H_
#define PSFLOW_WORKER_GRADIENT_CLIPPING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "proto/job_config.pb.h"

namespace psflow {

class GradientClipper {
 public:
  explicit GradientClipper(const GradientClipping& config);

  // Whether any clipping is configured.
  bool enabled() const { return enabled_; }
  // Whether a gradient may leave once ClipOne has clipped it (no global
  // norm to wait for).
  bool streams() const { return global_clip_norm_ <= 0; }

  // Per-tensor clipping of one final gradient span; each span once per
  // step. Returns whether it changed anything.
  bool ClipOne(absl::Span<float> gradient) const;

  // The step's end: per-tensor clipping of the `dense` spans not yet
  // clipped (`clipped[v]` false; empty: none were) and of every `rows`
  // span, then the global norm over all of them.
  void ClipRest(const std::vector<absl::Span<float>>& dense,
                const std::vector<bool>& clipped,
                const std::vector<absl::Span<float>>& rows);

  // Steps in which clipping changed a gradient, since the start.
  int64_t clipped_steps() const { return clipped_steps_; }
  // Marks the current step as clipped when ClipOne changed something.
  void NoteClipped() { step_clipped_ = true; }

 private:
  bool enabled_ = false;
  double clip_norm_ = 0, clip_value_ = 0, global_clip_norm_ = 0;
  bool step_clipped_ = false;
  int64_t clipped_steps_ = 0;
};

// Sum of squares of `values` in double, or NaN/Inf when one is not finite.
double SumOfSquares(absl::Span<const float> values);

}  // namespace psflow

#endif  // PSFLOW_WORKER_GRADIENT_CLIPPING_H_
