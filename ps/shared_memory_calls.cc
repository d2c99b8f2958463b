#include "ps/shared_memory_calls.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/protocol.h"
#include "ps/finite_values.h"

namespace psflow {

absl::StatusOr<SharedPullTarget> ResolveSharedPull(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, const PullBatchRequest& request) {
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
  ASSIGN_OR_RETURN(target.payload,
                   sessions.Resolve(request.shared(),
                                    total * int64_t{sizeof(float)}, caller));
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
    absl::string_view caller, const PushBatchRequest& request) {
  ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, service.ResolvePush(request));
  int64_t total = 0;
  for (const ChunkRef& ref : refs) total += ref.num_elements;
  ASSIGN_OR_RETURN(SharedMemorySessions::Payload shared,
                   sessions.Resolve(request.shared(),
                                    total * int64_t{sizeof(float)}, caller));
  // Checked whole, then read where it lies: no copy. The client could
  // write its memory between the check and the update; every update loop
  // reads a gradient as 0 where it is not finite (FiniteOrZero), so what
  // it wrote never reaches a variable. Copying the batch out instead cost
  // the default job's server more CPU than Adam (bench/RESULTS.md).
  absl::Span<const float> values = shared.values;
  std::shared_ptr<PooledBuffer> copy;
  if (!AllFinite(values)) {
    // Rare: copied out, so that the core finds, words and rejects a bad
    // value the client can no longer change.
    copy = service.pool().Acquire(total);
    std::memcpy(copy->data(), values.data(),
                static_cast<size_t>(total) * sizeof(float));
    values = copy->span().subspan(0, static_cast<size_t>(total));
  }
  std::vector<absl::Span<const float>> gradients;
  int64_t offset = 0;
  for (const ChunkRef& ref : refs) {
    gradients.push_back(values.subspan(offset, ref.num_elements));
    offset += ref.num_elements;
  }
  return service.Push(request, refs, gradients,
                      copy == nullptr
                          ? ParameterServerCore::Finite::kChecked
                          : ParameterServerCore::Finite::kUnchecked);
}

absl::StatusOr<std::unique_ptr<SharedRows>> ResolveSharedRows(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, uint32_t protocol_version,
    const google::protobuf::RepeatedPtrField<RowsPart>& parts,
    const SharedPayload& shared) {
  auto rows = std::make_unique<SharedRows>();
  // Bounds every part's ids, and all of them, first.
  ASSIGN_OR_RETURN(rows->tables,
                   service.core().ResolveRows(protocol_version, parts));
  int64_t num_ids = 0;
  int64_t floats = 0;
  for (int i = 0; i < parts.size(); ++i) {
    num_ids += parts.Get(i).num_ids();
    floats += parts.Get(i).num_ids() * rows->tables[i]->dim();
  }
  const int64_t rows_offset = RowsOffsetInPiece(num_ids);
  const int64_t expected = rows_offset + floats * int64_t{sizeof(float)};
  if (shared.bytes() != static_cast<uint64_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a rows request for '", parts.Get(0).table(), "' of ", num_ids,
        " ids names ", shared.bytes(), " bytes of shared memory; its ids and ",
        floats, " floats of rows (ids x each table's dim) take ", expected));
  }
  ASSIGN_OR_RETURN(rows->payload, sessions.Resolve(shared, expected, caller));
  rows->ids.resize(static_cast<size_t>(num_ids));
  std::memcpy(rows->ids.data(), rows->payload.values.data(),
              static_cast<size_t>(num_ids) * sizeof(int64_t));
  absl::Span<float> values = rows->payload.values.subspan(
      static_cast<size_t>(rows_offset) / sizeof(float));
  int64_t id_offset = 0;
  int64_t row_offset = 0;
  for (int i = 0; i < parts.size(); ++i) {
    const int64_t n = parts.Get(i).num_ids();
    const int64_t part_floats = n * rows->tables[i]->dim();
    rows->part_ids.push_back(absl::MakeConstSpan(rows->ids).subspan(
        static_cast<size_t>(id_offset), static_cast<size_t>(n)));
    rows->rows.push_back(values.subspan(static_cast<size_t>(row_offset),
                                        static_cast<size_t>(part_floats)));
    id_offset += n;
    row_offset += part_floats;
  }
  return rows;
}

absl::StatusOr<PushRowsResponse> PushRowsFromSharedMemory(
    PsService& service, SharedMemorySessions& sessions,
    absl::string_view caller, const PushRowsRequest& request) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<SharedRows> rows,
      ResolveSharedRows(service, sessions, caller, request.protocol_version(),
                        request.parts(), request.shared()));
  // The parts' rows lie back to back: one copy, so that the NaN/Inf check
  // and the update see the same values.
  const float* first = rows->rows.front().data();
  const size_t floats = static_cast<size_t>(rows->rows.back().data() +
                                            rows->rows.back().size() - first);
  std::shared_ptr<PooledBuffer> values =
      service.pool().Acquire(static_cast<int64_t>(floats));
  std::memcpy(values->data(), first, floats * sizeof(float));
  std::vector<absl::Span<const float>> gradients;
  for (absl::Span<float> part : rows->rows) {
    gradients.emplace_back(values->data() + (part.data() - first), part.size());
  }
  return service.PushRows(request, rows->tables, rows->part_ids, gradients);
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
