#include "ps/ring_call_handler.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/protocol.h"
#include "ps/ps_call_roles.h"
#include "ps/shared_memory_calls.h"

namespace psflow {

namespace {

// A forgotten session says so as the client recognizes over the ring.
absl::Status ForTheRing(absl::Status status) {
  if (SharedMemorySessions::IsLostSession(status)) {
    status.SetPayload(kSharedMemoryLostPayloadUrl, absl::Cord("lost"));
  }
  return status;
}

// Answers with `status`, or with `answer` serialized, counting the bytes
// as a bulk call's.
void Answer(ParameterServerCore& core, int64_t request_bytes,
            const SharedCallRingServer::Reply& reply,
            const absl::Status& status,
            const google::protobuf::MessageLite* answer) {
  if (!status.ok()) {
    core.CountBytes(request_bytes, 0);
    reply(ForTheRing(status), "");
    return;
  }
  std::string bytes = answer->SerializeAsString();
  core.CountBytes(request_bytes, static_cast<int64_t>(bytes.size()));
  reply(absl::OkStatus(), std::move(bytes));
}

template <typename Request>
absl::Status CheckRingBatch(const Request& request, uint64_t session,
                            absl::string_view what) {
  if (!request.has_shared()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", what,
                     " on the call ring names no shared memory for its "
                     "values; such a batch goes over gRPC"));
  }
  // A ring's calls reach only its own client's memory.
  if (request.shared().session() != session) {
    return absl::PermissionDeniedError(absl::StrCat(
        "a ", what,
        " on a call ring names another shared-memory session "
        "than the ring's own; a client's calls use its own region"));
  }
  if (request.parts_size() > kMaxRingBatchParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", what, " of ", request.parts_size(),
                     " parts on the call ring, which carries at most ",
                     kMaxRingBatchParts, "; larger batches go over gRPC"));
  }
  return absl::OkStatus();
}

// The caller may call `method`, `bytes` parse into `request`, and the
// batch is one the ring carries.
template <typename Request>
absl::Status ParseAllowed(const RingCallHandler::Allow& allow, uint64_t session,
                          absl::string_view caller, const RoleSet& roles,
                          const char* method, const std::string& bytes,
                          absl::string_view what, Request& request) {
  RETURN_IF_ERROR(allow(roles, method));
  if (!request.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", what, " on the call ring has a malformed header"));
  }
  RETURN_IF_ERROR(CheckClaimedWorker(caller, request));
  return CheckRingBatch(request, session, what);
}

}  // namespace

std::function<void()> RingCallHandler::Serve(
    uint32_t method, std::string request, absl::Time deadline,
    SharedCallRingServer::Reply reply) {
  (void)deadline;  // the ring cancels a waiting call at its deadline
  switch (method) {
    case kRingPushBatch:
      return ServePush(request, reply);
    case kRingPullBatch:
      return ServePull(request, reply);
    case kRingPullRows:
      return ServePullRows(request, reply);
    case kRingPushRows:
      ServePushRows(request, reply);
      return nullptr;
    default:
      reply(absl::UnimplementedError(
                absl::StrCat("unknown call ring method ", method,
                             "; is the client from another psflow release?")),
            "");
      return nullptr;
  }
}

absl::Status RingCallHandler::Closed() {
  return ForTheRing(absl::FailedPreconditionError(absl::StrCat(
      SharedMemorySessions::LostSessionText(),
      " (the server stopped serving its call ring); the client attaches "
      "again")));
}

std::function<void()> RingCallHandler::ServePush(
    const std::string& bytes, const SharedCallRingServer::Reply& reply) {
  ParameterServerCore& core = service_->core();
  const int64_t request_bytes = static_cast<int64_t>(bytes.size());
  PushBatchRequest request;
  absl::Status checked =
      ParseAllowed(allow_, session_, caller_, kTrainers, kBulkPushBatchMethod,
                   bytes, "push", request);
  if (checked.ok() && request.has_then_pull()) {
    checked = CheckRingBatch(request.then_pull(), session_, "push's then_pull");
  }
  if (!checked.ok()) {
    Answer(core, request_bytes, reply, checked, nullptr);
    return nullptr;
  }
  absl::StatusOr<PushBatchResponse> pushed =
      PushFromSharedMemory(*service_, *sessions_, caller_, request);
  if (!pushed.ok() || !request.has_then_pull()) {
    Answer(core, request_bytes, reply, pushed.status(),
           pushed.ok() ? &*pushed : nullptr);
    return nullptr;
  }
  if (absl::Status whole = AppliedWhole(*pushed); !whole.ok()) {
    Answer(core, request_bytes, reply, whole, nullptr);
    return nullptr;
  }
  core.CountBytes(request_bytes, 0);
  return StartPull(request.then_pull(), *std::move(pushed), reply);
}

std::function<void()> RingCallHandler::ServePull(
    const std::string& bytes, const SharedCallRingServer::Reply& reply) {
  PullBatchRequest request;
  absl::Status checked =
      ParseAllowed(allow_, session_, caller_, kReaders, kBulkPullBatchMethod,
                   bytes, "pull", request);
  if (checked.ok() && Trains(request)) {
    checked = allow_(kTrainers, "a pull that trains");
  }
  if (!checked.ok()) {
    Answer(service_->core(), static_cast<int64_t>(bytes.size()), reply, checked,
           nullptr);
    return nullptr;
  }
  service_->core().CountBytes(static_cast<int64_t>(bytes.size()), 0);
  return StartPull(request, std::nullopt, reply);
}

std::function<void()> RingCallHandler::ServePullRows(
    const std::string& bytes, const SharedCallRingServer::Reply& reply) {
  ParameterServerCore& core = service_->core();
  const int64_t request_bytes = static_cast<int64_t>(bytes.size());
  PullRowsRequest request;
  absl::Status checked =
      ParseAllowed(allow_, session_, caller_, kReaders, kBulkPullRowsMethod,
                   bytes, "rows pull", request);
  if (checked.ok() && Trains(request)) {
    checked = allow_(kTrainers, "a rows pull that trains");
  }
  absl::StatusOr<std::unique_ptr<SharedRows>> rows =
      checked.ok() ? ResolveSharedRows(*service_, *sessions_, caller_,
                                       request.protocol_version(),
                                       request.parts(), request.shared())
                   : checked;
  if (!rows.ok()) {
    Answer(core, request_bytes, reply, rows.status(), nullptr);
    return nullptr;
  }
  core.CountBytes(request_bytes, 0);
  // The ids, and the mapping the rows go into, stay until the pull is
  // answered (it may wait for a step).
  std::shared_ptr<SharedRows> held = *std::move(rows);
  std::shared_ptr<PsService::PendingRows> pending = service_->PullRows(
      request, held->part_ids, held->rows,
      [&core, reply, held](absl::StatusOr<PsService::RowsAnswer> answer) {
        if (!answer.ok()) {
          return Answer(core, 0, reply, answer.status(), nullptr);
        }
        Answer(core, 0, reply, absl::OkStatus(), &answer->response);
      });
  if (pending == nullptr) return nullptr;
  return [pending] { pending->Cancel(); };
}

void RingCallHandler::ServePushRows(const std::string& bytes,
                                    const SharedCallRingServer::Reply& reply) {
  PushRowsRequest request;
  absl::Status checked =
      ParseAllowed(allow_, session_, caller_, kTrainers, kBulkPushRowsMethod,
                   bytes, "rows push", request);
  absl::StatusOr<PushRowsResponse> pushed =
      checked.ok()
          ? PushRowsFromSharedMemory(*service_, *sessions_, caller_, request)
          : checked;
  Answer(service_->core(), static_cast<int64_t>(bytes.size()), reply,
         pushed.status(), pushed.ok() ? &*pushed : nullptr);
}

std::function<void()> RingCallHandler::StartPull(
    const PullBatchRequest& request, std::optional<PushBatchResponse> pushed,
    const SharedCallRingServer::Reply& reply) {
  ParameterServerCore& core = service_->core();
  absl::StatusOr<SharedPullTarget> target =
      ResolveSharedPull(*service_, *sessions_, caller_, request);
  if (!target.ok()) {
    Answer(core, 0, reply, target.status(), nullptr);
    return nullptr;
  }
  // The mapping stays until the pull is answered (it may wait for a step).
  std::shared_ptr<SharedMemoryRegion> region = target->payload.region;
  std::shared_ptr<PsService::PendingPull> pending = service_->Pull(
      request, std::move(target->pieces),
      [&core, reply, region, pushed = std::move(pushed)](
          absl::StatusOr<PsService::PullAnswer> answer) mutable {
        if (!answer.ok()) {
          return Answer(core, 0, reply, answer.status(), nullptr);
        }
        if (pushed.has_value()) {
          *pushed->mutable_pulled() = std::move(answer->response);
          return Answer(core, 0, reply, absl::OkStatus(), &*pushed);
        }
        Answer(core, 0, reply, absl::OkStatus(), &answer->response);
      });
  if (pending == nullptr) return nullptr;
  return [pending] { pending->Cancel(); };
}

}  // namespace psflow
