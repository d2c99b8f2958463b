// SYNC mode's overlap of communication with backward and the next forward
// (issue 35): a step's gradients go out in groups as backward finishes
// them (SyncPusher), and the next step's parameters come back in groups in
// forward order (ForwardGroups, PsHandles), so the first layer's values are
// not queued behind the rest.
//
// The servers aggregate SYNC gradients per variable chunk (one gradient per
// worker per chunk closes that chunk's step), so pushing and pulling
// subsets of the variables is the same protocol as one call for all.
//
// Not thread-safe: a trainer's thread uses them (Model::TrainStep calls
// ExampleBatch::gradient_ready on that thread too). Handles may finish on
// transport threads; PsHandle itself is thread-safe.
#ifndef PSFLOW_WORKER_SYNC_GROUPS_H_
#define PSFLOW_WORKER_SYNC_GROUPS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "client/ps_client.h"
#include "common/job/logical_variable.h"

namespace psflow {

// Variable indices in model order (forward's: the first layer's first),
// cut into consecutive groups of at least `group_bytes` each (the last may
// hold less); `group_bytes` <= 0: one variable per group.
std::vector<std::vector<int>> ForwardGroups(
    const std::vector<LogicalVariable>& variables, int64_t group_bytes);

// Several pulls or pushes waited on as one, in the shape of PsHandle.
class PsHandles {
 public:
  PsHandles() = default;
  explicit PsHandles(std::shared_ptr<PsHandle> handle);

  void Add(std::shared_ptr<PsHandle> handle);
  // Drops every handle (each waits for its calls, as PsHandle does).
  void Clear() { handles_.clear(); }
  bool empty() const { return handles_.empty(); }
  size_t size() const { return handles_.size(); }

  // Waits for every handle; the first error in the order they were added.
  absl::Status Wait();
  // After Wait(): the lowest version any handle saw; -1 if none did.
  int64_t min_version() const;
  // After Wait(): the highest worker clock any handle saw; else -1.
  int64_t worker_clock() const;

 private:
  std::vector<std::shared_ptr<PsHandle>> handles_;
};

// One SYNC step's gradient push, in groups. Start() names the step's
// gradient buffers; Ready(v) says variable v's is final (from
// ExampleBatch::gradient_ready), and the variables ready so far go out as
// one push once they hold at least `group_bytes`; Flush() pushes the rest
// (every variable not reported yet, in backward's order), and Wait()
// waits for all of the step's pushes.
class SyncPusher {
 public:
  SyncPusher(ParameterClient* client, std::vector<LogicalVariable> variables,
             int64_t group_bytes);

  // A new step: `gradients` (one per variable, in model order) must stay
  // valid and unchanged until Wait() returns or Reset(). Drops (waits
  // for) the previous step's pushes.
  void Start(std::vector<absl::Span<const float>> gradients, int64_t version,
             int worker);
  // Variable `v`'s gradient is final. A variable reported again, or out of
  // range, is ignored.
  void Ready(int v);
  // Pushes every variable not pushed yet this step.
  void Flush();
  // Waits for the step's pushes. OK when every one was applied; Aborted
  // (the step closed before some of this worker's gradient arrived: one
  // stale step, however many groups it hit) when that is the only error;
  // otherwise the first other error, in the order the pushes started.
  absl::Status Wait();
  // Drops the step's pushes (waiting for them: they read the buffers).
  void Reset();

  // The step's pushes so far (for tests and logs).
  int pushes_started() const { return static_cast<int>(pushes_.size()); }

 private:
  void PushPending();

  ParameterClient* const client_;
  const std::vector<LogicalVariable> variables_;
  const int64_t group_bytes_;

  std::vector<absl::Span<const float>> gradients_;
  int64_t version_ = 0;
  int worker_ = 0;
  std::vector<bool> pushed_;  // per variable: pending or pushed
  std::vector<int> pending_;
  int64_t pending_bytes_ = 0;
  std::vector<std::shared_ptr<PsHandle>> pushes_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_SYNC_GROUPS_H_
