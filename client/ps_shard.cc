#include "client/ps_shard.h"

#include <utility>

namespace psflow {

void PsShard::PushThenPull(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  PushBatchRequest push = header;
  PullBatchRequest pull = std::move(*push.mutable_then_pull());
  push.clear_then_pull();
  PushBatch(
      push, std::move(data), std::move(owner), deadline,
      [this, pull = std::move(pull), out = std::move(out), deadline,
       done =
           std::move(done)](absl::StatusOr<PushBatchResponse> pushed) mutable {
        if (!pushed.ok()) return done(std::move(pushed));
        // As the one-call form: the pull reads only a push applied whole.
        for (const PushPartResult& part : pushed->results()) {
          if (part.code() != 0) {
            return done(absl::Status(static_cast<absl::StatusCode>(part.code()),
                                     part.message()));
          }
        }
        PullBatch(pull, std::move(out), deadline,
                  [pushed = *std::move(pushed), done = std::move(done)](
                      absl::StatusOr<PullBatchResponse> pulled) mutable {
                    if (!pulled.ok()) return done(pulled.status());
                    *pushed.mutable_pulled() = *std::move(pulled);
                    done(std::move(pushed));
                  });
      });
}

}  // namespace psflow
