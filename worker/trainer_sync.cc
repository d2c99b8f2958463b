// The Trainer's SYNC overlap (worker/trainer.h, worker/sync_groups.h):
// gradients pushed in groups as backward finishes them, the next step's
// parameters pulled in groups in forward order.
#include <utility>
#include <vector>

#include "worker/trainer.h"

namespace psflow {

PsHandles Trainer::PullInForwardGroups(const HostTensors& t,
                                       int64_t min_version) {
  // Separate calls, started in forward order: the first layer's values are
  // not queued behind the rest at the client, the transport or the server.
  PsHandles pulls;
  for (const std::vector<int>& group : pull_groups_) {
    std::vector<ParameterClient::Mutable> targets;
    for (int v : group) {
      targets.emplace_back(parts_.variables[v].name, t.values[v]);
    }
    pulls.Add(parts_.client->Pull(targets, min_version));
  }
  return pulls;
}

void Trainer::StartSyncPush(ExampleBatch& example) {
  const std::vector<absl::Span<float>>& grads = grads_[grad_slot_].values;
  sync_push_.Start(
      std::vector<absl::Span<const float>>(grads.begin(), grads.end()),
      version_, options_.worker_index);
  // A slowed worker's gradients all wait for its delay (FinishSyncPush),
  // as a straggler's would: its early groups must not beat the others'.
  // A global clipping norm needs every gradient before any leaves.
  if (options_.slowdown.factor == 1 && clipper_.streams()) {
    if (!clipper_.enabled()) {
      example.gradient_ready = [this](int v) { sync_push_.Ready(v); };
      return;
    }
    clipped_.assign(grads.size(), false);
    example.gradient_ready = [this, grads](int v) {
      // Clipped once final, before its group may leave.
      if (clipper_.ClipOne(grads[v])) clipper_.NoteClipped();
      clipped_[v] = true;
      sync_push_.Ready(v);
    };
  }
}

absl::StatusOr<Trainer::Next> Trainer::FinishSyncPush() {
  // Some groups left during backward; the rest now.
  sync_push_.Flush();
  const absl::Time push_wait_start = parts_.clock->Now();
  absl::Status pushed = sync_push_.Wait();
  sync_push_.Reset();
  Observe(&PhaseTotals::push_wait, &WorkerMetrics::push_wait_seconds,
          push_wait_start);
  if (absl::IsAborted(pushed)) {
    // The step closed before (some of) this gradient arrived: one stale
    // step, however many of its groups came late.
    ++stale_;
    return Next::kGoOn;
  }
  if (!pushed.ok()) return AfterPushError(pushed);
  rejected_in_a_row_ = 0;
  return Next::kGoOn;
}

}  // namespace psflow
