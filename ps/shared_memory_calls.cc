#include "ps/shared_memory_calls.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/finite_values.h"

namespace psflow {

absl::StatusOr<SharedPullTarget> ResolveSharedPull(
    PsService& service, SharedMemorySessions& sessions,
    const PullBatchRequest& request) {
  int64_t total = 0;
  for (const PullRequest& part : request.parts()) {
    if (part.num_elements() <= 0 ||
        part.num_elements() > service.core().chunk_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "part \"", part.variable(), "\" of ", part.num_elements(),
          " elements is not within one chunk of ",
          service.core().chunk_elements()));
    }
    total += part.num_elements();
  }
  SharedPullTarget target;
  ASSIGN_OR_RETURN(
      target.payload,
      sessions.Resolve(request.shared(), total * int64_t{sizeof(float)}));
  int64_t offset = 0;
  for (const PullRequest& part : request.parts()) {
    target.pieces.push_back(
        target.payload.values.subspan(offset, part.num_elements()));
    offset += part.num_elements();
  }
  return target;
}

absl::StatusOr<PushBatchResponse> PushFromSharedMemory(
    PsService& service, SharedMemorySessions& sessions,
    const PushBatchRequest& request) {
  ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, service.ResolvePush(request));
  int64_t total = 0;
  for (const ChunkRef& ref : refs) total += ref.num_elements;
  ASSIGN_OR_RETURN(
      SharedMemorySessions::Payload shared,
      sessions.Resolve(request.shared(), total * int64_t{sizeof(float)}));
  std::shared_ptr<PooledBuffer> values = service.pool().Acquire(total);
  const bool finite =
      CopyAllFinite(shared.values, values->span().subspan(0, total));
  std::vector<absl::Span<const float>> gradients;
  int64_t offset = 0;
  for (const ChunkRef& ref : refs) {
    gradients.push_back(values->span().subspan(offset, ref.num_elements));
    offset += ref.num_elements;
  }
  // A batch with a bad value goes to the core unchecked, which rejects,
  // counts and words it.
  return service.Push(request, refs, gradients,
                      finite ? ParameterServerCore::Finite::kChecked
                             : ParameterServerCore::Finite::kUnchecked);
}

absl::Status AppliedWhole(const PushBatchResponse& response) {
  for (const PushPartResult& part : response.results()) {
    if (part.code() != 0) {
      return absl::Status(static_cast<absl::StatusCode>(part.code()),
                          part.message());
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow
