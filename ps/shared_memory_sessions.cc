#include "ps/shared_memory_sessions.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

constexpr char kLostSession[] = "unknown shared-memory session";

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

// The session's id stays out of the message: it is its owner's to know.
absl::Status NotTheOwner(absl::string_view caller) {
  return absl::PermissionDeniedError(absl::StrCat(
      "the shared-memory session named belongs to another caller than ",
      caller.empty() ? "this one" : absl::StrCat("\"", caller, "\""),
      "; a client may use only the sessions it attached"));
}

}  // namespace

absl::StatusOr<uint64_t> SharedMemorySessions::Attach(
    const AttachSharedMemoryRequest& request, absl::string_view owner) {
  if (request.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("client speaks protocol ", request.protocol_version(),
                     ", this server ", kProtocolVersion));
  }
  if (!options_.enabled) {
    return absl::FailedPreconditionError(
        "shared memory is disabled on this server (--shared_memory=false)");
  }
  // A mapped region keeps the client's pages alive after it exits: their
  // size, and how many are held, are bounded before one is opened.
  if (request.total_bytes() > kMaxSharedMemoryRegionBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a shared-memory region of ", request.total_bytes(),
                     " bytes; this server maps at most ",
                     kMaxSharedMemoryRegionBytes, " per client"));
  }
  {
    MutexLock lock(&mu_);
    if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this server already holds ", sessions_.size(),
                       " shared-memory sessions"));
    }
  }
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
      SharedMemoryRegion::Open(static_cast<pid_t>(request.pid()), request.fd(),
                               request.total_bytes(), request.token());
  if (!region.ok()) return region.status();
  auto session = std::make_unique<Session>();
  session->owner = std::string(owner);
  session->region = *std::move(region);
  session->last_used_ns.store(NowNs());
  ForgetIdle();
  MutexLock lock(&mu_);
  if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this server already holds ", sessions_.size(),
                     " shared-memory sessions"));
  }
  // Never 0, which clients read as "not attached".
  uint64_t id = 0;
  while (id == 0 || sessions_.count(id) > 0) id = absl::Uniform<uint64_t>(ids_);
  sessions_[id] = std::move(session);
  return id;
}

SharedMemorySessions::Session::~Session() {
  if (ring == nullptr) return;
  const int64_t calls = ring->calls();
  ring.reset();  // answers what it holds, then closes the ring
  ring_calls->fetch_add(calls, std::memory_order_relaxed);
}

absl::Status SharedMemorySessions::ServeRing(
    uint64_t session, int64_t offset,
    std::shared_ptr<SharedCallRingServer::Handler> handler) {
  if (options_.max_rings <= 0) {
    return absl::FailedPreconditionError(
        "this server serves no call rings (ps_server --shared_memory_ring="
        "false)");
  }
  std::shared_ptr<SharedMemoryRegion> region;
  {
    MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kLostSession, " ", session));
    }
    if (it->second->ring != nullptr) {
      return absl::FailedPreconditionError("the session serves a ring already");
    }
    int rings = 0;
    for (const auto& [id, held] : sessions_) rings += held->ring != nullptr;
    if (rings >= options_.max_rings) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this server already serves ", rings, " call rings"));
    }
    region = it->second->region;
  }
  // Started outside the lock (it reads the client's memory and starts a
  // thread); stopped outside it too if the session went meanwhile.
  ASSIGN_OR_RETURN(std::unique_ptr<SharedCallRingServer> ring,
                   SharedCallRingServer::Start(std::move(region), offset,
                                               std::move(handler)));
  {
    MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it != sessions_.end() && it->second->ring == nullptr) {
      it->second->ring_calls = &forgotten_ring_calls_;
      it->second->ring = std::move(ring);
      return absl::OkStatus();
    }
  }
  ring.reset();  // the session went meanwhile
  return absl::FailedPreconditionError(
      absl::StrCat(kLostSession, " ", session));
}

int64_t SharedMemorySessions::rings() const {
  ReaderMutexLock lock(&mu_);
  int64_t rings = 0;
  for (const auto& [id, session] : sessions_) rings += session->ring != nullptr;
  return rings;
}

int64_t SharedMemorySessions::ring_calls() const {
  int64_t calls = forgotten_ring_calls_.load(std::memory_order_relaxed);
  ReaderMutexLock lock(&mu_);
  for (const auto& [id, session] : sessions_) {
    if (session->ring != nullptr) calls += session->ring->calls();
  }
  return calls;
}

const char* SharedMemorySessions::LostSessionText() { return kLostSession; }

absl::Status SharedMemorySessions::Detach(uint64_t session,
                                          absl::string_view caller) {
  std::unique_ptr<Session> gone;  // unmapped outside the lock
  MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return absl::OkStatus();
  if (it->second->owner != caller) return NotTheOwner(caller);
  gone = std::move(it->second);
  sessions_.erase(it);
  return absl::OkStatus();
}

void SharedMemorySessions::DetachAll() {
  std::map<uint64_t, std::unique_ptr<Session>> gone;
  MutexLock lock(&mu_);
  gone.swap(sessions_);
}

void SharedMemorySessions::ForgetIdle() {
  const int64_t now = NowNs();
  const int64_t idle_ns = absl::ToInt64Nanoseconds(options_.idle_timeout);
  next_sweep_ns_.store(now + std::max<int64_t>(idle_ns / 4, 1'000'000),
                       std::memory_order_relaxed);
  std::vector<std::unique_ptr<Session>> gone;  // unmapped outside the lock
  MutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second->last_used_ns.load() < now - idle_ns) {
      gone.push_back(std::move(it->second));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<SharedMemorySessions::Payload> SharedMemorySessions::Resolve(
    const SharedPayload& shared, int64_t expected_bytes,
    absl::string_view caller) {
  // A client that died without detaching is forgotten here too, so its
  // pages do not wait for the next attach.
  // Not on a ring's thread: forgetting its own session would stop the ring
  // from inside it.
  if (NowNs() >= next_sweep_ns_.load(std::memory_order_relaxed) &&
      !SharedCallRingServer::OnRingThread()) {
    ForgetIdle();
  }
  std::shared_ptr<SharedMemoryRegion> region;
  {
    ReaderMutexLock lock(&mu_);
    auto it = sessions_.find(shared.session());
    if (it == sessions_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kLostSession, " ", shared.session(),
                       " (the server restarted or the session sat idle); "
                       "the client attaches again"));
    }
    if (it->second->owner != caller) {
      return NotTheOwner(caller);
    }
    it->second->last_used_ns.store(NowNs(), std::memory_order_relaxed);
    region = it->second->region;
  }
  const uint64_t total = static_cast<uint64_t>(region->total_bytes());
  if (shared.offset() < static_cast<uint64_t>(kSharedMemoryHeaderBytes) ||
      shared.offset() % kSharedMemoryAlignment != 0 ||
      shared.bytes() != static_cast<uint64_t>(expected_bytes) ||
      shared.offset() > total || shared.bytes() > total - shared.offset()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory range [", shared.offset(), ", +", shared.bytes(),
        ") does not hold ", expected_bytes, " bytes inside the ", total,
        "-byte region (offsets are multiples of ", kSharedMemoryAlignment,
        " past the ", kSharedMemoryHeaderBytes, "-byte header)"));
  }
  bytes_.fetch_add(expected_bytes, std::memory_order_relaxed);
  float* values = reinterpret_cast<float*>(region->base() + shared.offset());
  return Payload{std::move(region),
                 absl::Span<float>(values, static_cast<size_t>(expected_bytes) /
                                               sizeof(float))};
}

int64_t SharedMemorySessions::size() const {
  ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(sessions_.size());
}

bool SharedMemorySessions::IsLostSession(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StartsWith(status.message(), kLostSession);
}

}  // namespace psflow
