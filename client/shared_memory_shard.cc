#include "client/shared_memory_shard.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/shared_memory_shard_parts.h"
#include "common/logging.h"
#include "common/shared_call_ring.h"
#include "common/shared_call_ring_client.h"
#include "proto/protocol.h"

namespace psflow {

AttachSharedMemoryRequest AttachRequestFor(const SharedMemoryRegion& region) {
  AttachSharedMemoryRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_pid(getpid());
  request.set_fd(region.fd());
  request.set_total_bytes(region.total_bytes());
  request.set_token(region.token());
  return request;
}

using shared_memory_shard_internal::CopyIn;
using shared_memory_shard_internal::CopyOut;
using shared_memory_shard_internal::PiecesAt;
using shared_memory_shard_internal::PostOnRing;
using shared_memory_shard_internal::ServerMayStillUse;
using shared_memory_shard_internal::TotalBytes;

class SharedMemoryShard::PinnedBuffer final : public SharedBuffer {
 public:
  explicit PinnedBuffer(std::shared_ptr<Lease> lease)
      : lease_(std::move(lease)) {}
  absl::Span<float> span() override {
    return {lease_->values(),
            static_cast<size_t>(lease_->bytes) / sizeof(float)};
  }
  // Also once its region was replaced: calls no longer use it in place,
  // so its owner is better off with fresh memory from the new one.
  bool retired() const override {
    return lease_->retired.load(std::memory_order_acquire) ||
           lease_->arena->replaced();
  }

 private:
  const std::shared_ptr<Lease> lease_;
};

namespace {

// Whether every buffer holds exactly its part's elements. Calls that do
// not go without the region, where they get the transport's size errors.
template <typename Header, typename Span>
bool SizesMatch(const Header& header, const std::vector<Span>& pieces) {
  if (header.parts_size() != static_cast<int>(pieces.size())) return false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (header.parts(static_cast<int>(i)).num_elements() !=
        static_cast<int64_t>(pieces[i].size())) {
      return false;
    }
  }
  return true;
}

// Keeps both alive for as long as a resend's frame holds its values.
std::shared_ptr<const void> Both(std::shared_ptr<const void> a,
                                 std::shared_ptr<const void> b) {
  return std::make_shared<
      std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>>(
      std::move(a), std::move(b));
}

}  // namespace

SharedMemoryShard::SharedMemoryShard(
    std::unique_ptr<SharedMemoryTransport> transport, int64_t region_bytes,
    bool call_ring)
    : transport_(std::move(transport)), call_ring_(call_ring) {
  const int64_t bytes = (region_bytes + 4095) / 4096 * 4096;
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
      SharedMemoryRegion::Create(bytes);
  if (!region.ok()) {
    LOG(INFO) << "bulk data with " << name()
              << " stays on TCP: " << region.status().message();
    return;
  }
  MutexLock lock(&mu_);
  arena_ = std::make_shared<SharedMemoryArena>(*std::move(region));
  StartOffer();
}

SharedMemoryShard::~SharedMemoryShard() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  transport_->CancelSharedMemoryOffers();
  uint64_t session = 0;
  {
    MutexLock lock(&mu_);
    mu_.Await(Condition(
        +[](int* n) { return *n == 0; }, &calls_in_flight_));
    session = session_;
  }
  if (session != 0) {
    transport_->DetachSharedMemory(session,
                                   absl::Now() + absl::Milliseconds(500));
  }
  // No call is in flight: each ring's thread ends.
  std::vector<std::shared_ptr<Ring>> rings;
  {
    MutexLock lock(&mu_);
    rings.swap(rings_);
    ring_.reset();
  }
}

void SharedMemoryShard::CallStarted() {
  MutexLock lock(&mu_);
  ++calls_in_flight_;
}

// The last use of `this` by a callback: the destructor may run once the
// lock is released.
void SharedMemoryShard::CallEnded() {
  MutexLock lock(&mu_);
  --calls_in_flight_;
}

void SharedMemoryShard::StartOffer() {
  state_ = State::kAttaching;
  ++calls_in_flight_;
  AttachSharedMemoryRequest request = AttachRequestFor(arena_->region());
  ring_.reset();
  std::shared_ptr<Ring> ring;
  if (call_ring_) {
    if (std::optional<int64_t> offset =
            arena_->Allocate(kRingBytes, /*for_ring=*/true)) {
      ring = std::make_shared<Ring>();
      ring->arena = arena_;
      ring->offset = *offset;
      SharedCallRingClient::Options options;
      options.server_name = name();
      // Calls the server never took from a ring it stopped serving (it
      // forgot the session): resent over the transport, as a lost
      // session's calls are.
      options.never_served = MarkSharedMemoryLost(absl::FailedPreconditionError(
          absl::StrCat(name(),
                       " stopped serving our call ring (it forgot "
                       "the session); resending over gRPC")));
      // The server's own descriptor of the region closes when its process
      // ends: the ring notices at once.
      options.region_fd = arena_->region().fd();
      // Written before the offer: the server checks it as it attaches.
      ring->client =
          std::make_unique<SharedCallRingClient>(arena_->at(*offset), options);
      request.set_ring_offset(static_cast<uint64_t>(*offset));
    }
  }
  transport_->OfferSharedMemory(
      request, [this, arena = arena_,
                ring](absl::StatusOr<AttachSharedMemoryResponse> answer) {
        MutexLock lock(&mu_);
        --calls_in_flight_;
        const bool attached =
            arena == arena_ && answer.ok() && answer->session() != 0;
        if (ring != nullptr) {
          if (attached && answer->ring()) {
            ring->session = answer->session();
            ring_ = ring;
            rings_.push_back(ring);
          } else {
            // Its thread ends here, outside any ring callback. Its memory
            // goes back only when the server said it does not serve rings:
            // after a failed offer the server might serve it still.
            ring->client.reset();
            if (answer.ok() && !answer->ring()) arena->Free(ring->offset);
          }
        }
        if (arena != arena_) return;  // An older region's answer.
        if (attached) {
          // Kept even when closing, so that the destructor detaches it.
          session_ = answer->session();
          state_ = State::kAttached;
          ever_attached_ = true;
          if (!closing_) {
            LOG(INFO) << "bulk data with " << name()
                      << " goes through shared memory"
                      << (ring_ != nullptr ? ", its calls through a call ring"
                                           : "");
          }
          return;
        }
        state_ = State::kOff;
        if (!closing_) {
          LOG(INFO) << "bulk data with " << name() << " stays on TCP: "
                    << (answer.ok() ? "the server's answer has no session"
                                    : answer.status().message());
        }
      });
}

std::shared_ptr<SharedMemoryShard::Lease> SharedMemoryShard::LeasePiece(
    int64_t bytes) {
  if (bytes <= 0) return nullptr;
  uint64_t session = 0;
  std::shared_ptr<SharedMemoryArena> arena;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kAttached || closing_) return nullptr;
    session = session_;
    arena = arena_;
    // Counted before the call starts, so the destructor waits for it.
    ++calls_in_flight_;
  }
  std::optional<int64_t> offset = arena->Allocate(bytes);
  if (!offset.has_value()) {  // Full: this call goes without the region.
    CallEnded();
    return nullptr;
  }
  return std::make_shared<Lease>(std::move(arena), session, *offset, bytes);
}

std::shared_ptr<SharedBuffer> SharedMemoryShard::AllocateShared(
    int64_t elements) {
  if (elements <= 0) return nullptr;
  // A worker allocates right after configuring the server, when the offer
  // made at construction is usually answered; a little wait spares it a
  // whole run of copies when it is not. Later (a worker replacing memory a
  // failed call gave up) a pending offer is not waited for: ordinary
  // memory serves until the next restart.
  bool first_offer = false;
  {
    MutexLock lock(&mu_);
    first_offer = !ever_attached_;
  }
  if (first_offer) WaitForSharedMemory(absl::Seconds(5));
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  std::shared_ptr<Lease> lease;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kAttached || closing_) return nullptr;
    std::optional<int64_t> offset = arena_->Allocate(bytes);
    if (!offset.has_value()) return nullptr;
    lease = std::make_shared<Lease>(arena_, session_, *offset, bytes);
    for (auto it = pinned_.begin(); it != pinned_.end();) {
      it = it->second.expired() ? pinned_.erase(it) : std::next(it);
    }
    pinned_[reinterpret_cast<uintptr_t>(lease->values())] = lease;
  }
  // Zero-filled, as other host buffers are (the piece may have been used);
  // outside the lock, which calls take.
  std::fill_n(lease->values(), elements, 0.0f);
  return std::make_shared<PinnedBuffer>(std::move(lease));
}

template <typename Span>
std::optional<SharedMemoryShard::InPlace> SharedMemoryShard::FindInPlace(
    const std::vector<Span>& pieces) {
  if (pieces.empty()) return std::nullopt;
  for (size_t i = 1; i < pieces.size(); ++i) {
    if (pieces[i].data() != pieces[i - 1].data() + pieces[i - 1].size()) {
      return std::nullopt;  // not one run
    }
  }
  const auto begin = reinterpret_cast<uintptr_t>(pieces[0].data());
  const int64_t bytes = TotalBytes(pieces);
  MutexLock lock(&mu_);
  if (state_ != State::kAttached || closing_ || pinned_.empty()) {
    return std::nullopt;
  }
  auto it = pinned_.upper_bound(begin);
  if (it == pinned_.begin()) return std::nullopt;
  --it;
  std::shared_ptr<Lease> lease = it->second.lock();
  // Memory of a replaced region, or given up, is used with a copy.
  if (lease == nullptr || lease->arena != arena_ ||
      lease->retired.load(std::memory_order_acquire)) {
    return std::nullopt;
  }
  const int64_t skip = static_cast<int64_t>(begin - it->first);
  if (skip + bytes > lease->bytes) return std::nullopt;
  const int64_t offset = lease->offset + skip;
  if (offset % kSharedMemoryAlignment != 0) return std::nullopt;
  ++calls_in_flight_;
  InPlace in_place;
  in_place.payload.set_session(session_);
  in_place.payload.set_offset(static_cast<uint64_t>(offset));
  in_place.payload.set_bytes(static_cast<uint64_t>(bytes));
  in_place.lease = std::move(lease);
  return in_place;
}

void SharedMemoryShard::CancelInFlight() {
  std::vector<std::shared_ptr<Ring>> rings;
  {
    MutexLock lock(&mu_);
    rings = rings_;
  }
  for (const std::shared_ptr<Ring>& ring : rings) ring->client->CancelAll();
  transport_->CancelInFlight();
}

void SharedMemoryShard::Close() {
  {
    MutexLock lock(&mu_);
    closed_ = true;  // RingFor() gives no ring from here on
  }
  CancelInFlight();
  transport_->Close();
}

bool SharedMemoryShard::ring_in_use() const {
  MutexLock lock(&mu_);
  return ring_ != nullptr && ring_->client->usable();
}

int64_t SharedMemoryShard::ring_calls() const {
  MutexLock lock(&mu_);
  int64_t calls = 0;
  for (const std::shared_ptr<Ring>& ring : rings_) {
    calls += ring->client->calls_answered();
  }
  return calls;
}

std::shared_ptr<SharedMemoryShard::Ring> SharedMemoryShard::RingFor(
    uint64_t session) {
  MutexLock lock(&mu_);
  if (ring_ == nullptr || ring_->session != session || closed_ ||
      !ring_->client->usable()) {
    return nullptr;
  }
  return ring_;
}

void SharedMemoryShard::SendShared(
    const PullBatchRequest& header, absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  std::shared_ptr<Ring> ring = header.parts_size() <= kMaxRingBatchParts
                                   ? RingFor(header.shared().session())
                                   : nullptr;
  if (ring != nullptr && PostOnRing(*ring->client, kRingPullBatch, header,
                                    deadline, name(), done)) {
    return;
  }
  transport_->PullBatch(header, {}, deadline, std::move(done));
}

void SharedMemoryShard::SendShared(
    const PushBatchRequest& header, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  std::shared_ptr<Ring> ring =
      header.parts_size() <= kMaxRingBatchParts &&
              header.then_pull().parts_size() <= kMaxRingBatchParts
          ? RingFor(header.shared().session())
          : nullptr;
  if (ring != nullptr && PostOnRing(*ring->client, kRingPushBatch, header,
                                    deadline, name(), done)) {
    return;
  }
  if (header.has_then_pull()) {
    transport_->PushThenPull(header, {}, nullptr, {}, deadline,
                             std::move(done));
  } else {
    transport_->PushBatch(header, {}, nullptr, deadline, std::move(done));
  }
}

void SharedMemoryShard::RetirePiece(Lease& lease, const absl::Status& why) {
  if (lease.retired.exchange(true, std::memory_order_acq_rel)) return;
  {
    // After Close() every call is cancelled; the job is over, so neither a
    // warning per call nor a fresh region is of use.
    MutexLock lock(&mu_);
    if (closed_) return;
  }
  LOG(WARNING) << name() << ": a call ended with " << why.message()
               << "; keeping its " << lease.bytes
               << " bytes of shared memory out of use, as the server may "
                  "still be using them";
  if (lease.arena->CountRetired(lease.bytes) * 2 <= lease.arena->capacity()) {
    return;
  }
  MutexLock lock(&mu_);
  if (closing_ || arena_ != lease.arena || state_ != State::kAttached) {
    return;  // Already replaced, being offered again, or shutting down.
  }
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
      SharedMemoryRegion::Create(arena_->capacity());
  if (!region.ok()) return;  // Keep the old one: its free pieces still work.
  LOG(WARNING) << "half of the shared memory with " << name()
               << " is held by calls that failed; offering a fresh region";
  arena_->MarkReplaced();
  // The old region lives on while calls hold pieces of it; the server
  // forgets its session once idle.
  arena_ = std::make_shared<SharedMemoryArena>(*std::move(region));
  session_ = 0;
  StartOffer();
}

void SharedMemoryShard::OnLost(uint64_t session) {
  MutexLock lock(&mu_);
  if (closing_ || state_ != State::kAttached || session_ != session) {
    return;  // Already handled, or shutting down.
  }
  LOG(WARNING) << name() << " forgot our shared memory (it restarted?); "
               << "offering it again, and resending over TCP meanwhile";
  session_ = 0;
  StartOffer();
}

int64_t SharedMemoryShard::shared_memory_bytes_held() const {
  MutexLock lock(&mu_);
  return arena_ == nullptr ? 0 : arena_->used_bytes();
}

bool SharedMemoryShard::WaitForSharedMemory(absl::Duration timeout) {
  MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(
      Condition(
          +[](State* state) { return *state != State::kAttaching; }, &state_),
      timeout);
  return state_ == State::kAttached;
}

void SharedMemoryShard::PullBatch(
    const PullBatchRequest& header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done) {
  if (!SizesMatch(header, out)) {
    return transport_->PullBatch(header, std::move(out), deadline,
                                 std::move(done));
  }
  if (std::optional<InPlace> in_place = FindInPlace(out)) {
    return PullInPlace(header, std::move(out), deadline, std::move(done),
                       *std::move(in_place));
  }
  std::shared_ptr<Lease> lease = LeasePiece(TotalBytes(out));
  if (lease == nullptr) {
    return transport_->PullBatch(header, std::move(out), deadline,
                                 std::move(done));
  }
  PullVia(header, std::move(out), deadline, std::move(done), std::move(lease));
}

void SharedMemoryShard::FailPull(
    std::shared_ptr<Lease> lease, const absl::Status& status,
    const std::function<void(absl::StatusOr<PullBatchResponse>)>& done) {
  if (ServerMayStillUse(status.code())) RetirePiece(*lease, status);
  // The piece goes back before `done` runs, so a caller that waits for it
  // finds the region as it was.
  lease.reset();
  done(status);
  CallEnded();
}

absl::Status SharedMemoryShard::AllPartsAnswered(absl::string_view call,
                                                 int answered,
                                                 size_t parts) const {
  if (answered == static_cast<int>(parts)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " ", name(),
                                          ": the server answered ", answered,
                                          " parts for ", parts));
}

void SharedMemoryShard::PullInPlace(
    PullBatchRequest header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done,
    InPlace in_place) {
  PullBatchRequest shared_header = header;
  *shared_header.mutable_shared() = in_place.payload;
  const uint64_t session = in_place.payload.session();
  SendShared(shared_header, deadline,
             [this, header = std::move(header), out = std::move(out), deadline,
              done = std::move(done), lease = std::move(in_place.lease),
              session](absl::StatusOr<PullBatchResponse> answer) mutable {
               if (!answer.ok()) {
                 const absl::Status& status = answer.status();
                 if (IsSharedMemoryLost(status)) {
                   // Refused before anything was written: resent without the
                   // region, into the same memory (the caller's buffers).
                   OnLost(session);
                   header.clear_shared();
                   transport_->PullBatch(
                       header, std::move(out), deadline,
                       [lease = std::move(lease), done = std::move(done)](
                           absl::StatusOr<PullBatchResponse> resent) mutable {
                         done(std::move(resent));
                       });
                   return CallEnded();
                 }
                 // Not resent, even on Unavailable: a first attempt that
                 // reached the server may still write this memory, which the
                 // caller must leave first (SharedBuffer::retired).
                 return FailPull(std::move(lease), status, done);
               }
               if (absl::Status whole = AllPartsAnswered(
                       "pull from", answer->versions_size(), out.size());
                   !whole.ok()) {
                 lease.reset();
                 done(whole);
                 return CallEnded();
               }
               bytes_in_place_.fetch_add(TotalBytes(out),
                                         std::memory_order_relaxed);
               lease.reset();
               done(std::move(answer));
               CallEnded();
             });
}

void SharedMemoryShard::PullVia(
    PullBatchRequest header, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PullBatchResponse>)> done,
    std::shared_ptr<Lease> lease) {
  *header.mutable_shared() = lease->payload();
  PullBatchRequest shared_header = header;
  SendShared(shared_header, deadline,
             [this, header = std::move(header), out = std::move(out), deadline,
              done = std::move(done), lease = std::move(lease)](
                 absl::StatusOr<PullBatchResponse> answer) mutable {
               if (!answer.ok()) {
                 const absl::Status& status = answer.status();
                 const bool lost = IsSharedMemoryLost(status);
                 if (lost || (status.code() == absl::StatusCode::kUnavailable &&
                              absl::Now() < deadline)) {
                   // Resent without the region (with the transport's retries):
                   // never into the same piece, which a first attempt that
                   // reached the server may still fill.
                   if (lost) {
                     OnLost(lease->session);
                   } else {
                     RetirePiece(*lease, status);
                   }
                   lease.reset();
                   header.clear_shared();
                   transport_->PullBatch(header, std::move(out), deadline,
                                         std::move(done));
                   return CallEnded();
                 }
                 return FailPull(std::move(lease), status, done);
               }
               if (absl::Status whole = AllPartsAnswered(
                       "pull from", answer->versions_size(), out.size());
                   !whole.ok()) {
                 lease.reset();
                 done(whole);
                 return CallEnded();
               }
               CopyOut(lease->values(), out);
               bytes_copied_.fetch_add(TotalBytes(out),
                                       std::memory_order_relaxed);
               lease.reset();
               done(std::move(answer));
               CallEnded();
             });
}

void SharedMemoryShard::PushBatch(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  if (!SizesMatch(header, data)) {
    return transport_->PushBatch(header, std::move(data), std::move(owner),
                                 deadline, std::move(done));
  }
  if (std::optional<InPlace> in_place = FindInPlace(data)) {
    return PushInPlace(header, std::move(data), std::move(owner), deadline,
                       std::move(done), *std::move(in_place));
  }
  std::shared_ptr<Lease> lease = LeasePiece(TotalBytes(data));
  if (lease == nullptr) {
    return transport_->PushBatch(header, std::move(data), std::move(owner),
                                 deadline, std::move(done));
  }
  PushVia(header, std::move(data), std::move(owner), deadline, std::move(done),
          std::move(lease));
}

void SharedMemoryShard::PushVia(
    PushBatchRequest header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done,
    std::shared_ptr<Lease> lease) {
  // One copy into the region; the caller's buffer is free from here on.
  CopyIn(data, lease->values());
  bytes_copied_.fetch_add(TotalBytes(data), std::memory_order_relaxed);
  owner.reset();
  *header.mutable_shared() = lease->payload();
  PushBatchRequest shared_header = header;
  SendShared(shared_header, deadline,
             [this, header = std::move(header), data = std::move(data),
              deadline, done = std::move(done), lease = std::move(lease)](
                 absl::StatusOr<PushBatchResponse> answer) mutable {
               if (!answer.ok() && IsSharedMemoryLost(answer.status())) {
                 // Refused before anything was applied: resend the values,
                 // which are still in the region, without it; the lease lives
                 // as long as the resend's frame.
                 OnLost(lease->session);
                 header.clear_shared();
                 std::vector<absl::Span<const float>> copies =
                     PiecesAt(lease->values(), data);
                 transport_->PushBatch(header, std::move(copies),
                                       std::move(lease), deadline,
                                       std::move(done));
                 return CallEnded();
               }
               if (!answer.ok() && ServerMayStillUse(answer.status().code())) {
                 RetirePiece(*lease, answer.status());
               }
               lease.reset();
               done(std::move(answer));
               CallEnded();
             });
}

void SharedMemoryShard::PushInPlace(
    PushBatchRequest header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done,
    InPlace in_place) {
  PushBatchRequest shared_header = header;
  *shared_header.mutable_shared() = in_place.payload;
  const uint64_t session = in_place.payload.session();
  SendShared(shared_header, deadline,
             [this, header = std::move(header), data = std::move(data),
              owner = std::move(owner), deadline, done = std::move(done),
              lease = std::move(in_place.lease),
              session](absl::StatusOr<PushBatchResponse> answer) mutable {
               if (!answer.ok() && IsSharedMemoryLost(answer.status())) {
                 // Refused before anything was applied: resent without the
                 // region, from the same memory.
                 OnLost(session);
                 header.clear_shared();
                 transport_->PushBatch(header, std::move(data),
                                       Both(std::move(owner), std::move(lease)),
                                       deadline, std::move(done));
                 return CallEnded();
               }
               if (!answer.ok() && ServerMayStillUse(answer.status().code())) {
                 RetirePiece(*lease, answer.status());
               } else if (answer.ok()) {
                 bytes_in_place_.fetch_add(TotalBytes(data),
                                           std::memory_order_relaxed);
               }
               lease.reset();
               owner.reset();
               done(std::move(answer));
               CallEnded();
             });
}

void SharedMemoryShard::PushThenPullInPlace(
    PushBatchRequest header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done, InPlace push,
    InPlace pull) {
  PushBatchRequest shared_header = header;
  *shared_header.mutable_shared() = push.payload;
  *shared_header.mutable_then_pull()->mutable_shared() = pull.payload;
  const uint64_t session = push.payload.session();
  SendShared(shared_header, deadline,
             [this, header = std::move(header), data = std::move(data),
              owner = std::move(owner), out = std::move(out), deadline,
              done = std::move(done), push_lease = std::move(push.lease),
              pull_lease = std::move(pull.lease),
              session](absl::StatusOr<PushBatchResponse> answer) mutable {
               if (!answer.ok() && IsSharedMemoryLost(answer.status())) {
                 // Refused before anything was applied: resent without the
                 // region, from and into the same memory.
                 OnLost(session);
                 transport_->PushThenPull(
                     header, std::move(data),
                     Both(std::move(owner),
                          Both(std::move(push_lease), std::move(pull_lease))),
                     std::move(out), deadline, std::move(done));
                 return CallEnded();
               }
               if (!answer.ok() && ServerMayStillUse(answer.status().code())) {
                 RetirePiece(*push_lease, answer.status());
                 RetirePiece(*pull_lease, answer.status());
               } else if (answer.ok()) {
                 bytes_in_place_.fetch_add(TotalBytes(data) + TotalBytes(out),
                                           std::memory_order_relaxed);
               }
               push_lease.reset();
               pull_lease.reset();
               owner.reset();
               done(std::move(answer));
               CallEnded();
             });
}

void SharedMemoryShard::PushThenPull(
    const PushBatchRequest& header, std::vector<absl::Span<const float>> data,
    std::shared_ptr<const void> owner, std::vector<absl::Span<float>> out,
    absl::Time deadline,
    std::function<void(absl::StatusOr<PushBatchResponse>)> done) {
  const bool sizes_match =
      SizesMatch(header, data) && SizesMatch(header.then_pull(), out);
  if (sizes_match) {
    if (std::optional<InPlace> push = FindInPlace(data)) {
      std::optional<InPlace> pull = FindInPlace(out);
      CallEnded();  // counted once below, or not at all
      if (pull.has_value()) {
        return PushThenPullInPlace(header, std::move(data), std::move(owner),
                                   std::move(out), deadline, std::move(done),
                                   *std::move(push), *std::move(pull));
      }
    }
  }
  // One piece holds both: the gradients, then (from the next multiple of
  // 64 bytes, as the server requires) the pulled values.
  const int64_t push_bytes = (TotalBytes(data) + 63) / 64 * 64;
  std::shared_ptr<Lease> lease =
      sizes_match ? LeasePiece(push_bytes + TotalBytes(out)) : nullptr;
  if (lease == nullptr) {
    return transport_->PushThenPull(header, std::move(data), std::move(owner),
                                    std::move(out), deadline, std::move(done));
  }
  // One copy into the region; the caller's buffer is free from here on.
  CopyIn(data, lease->values());
  bytes_copied_.fetch_add(TotalBytes(data), std::memory_order_relaxed);
  owner.reset();
  PushBatchRequest shared_header = header;
  SharedPayload push_payload = lease->payload();
  push_payload.set_bytes(static_cast<uint64_t>(TotalBytes(data)));
  SharedPayload pull_payload = lease->payload();
  pull_payload.set_offset(pull_payload.offset() +
                          static_cast<uint64_t>(push_bytes));
  pull_payload.set_bytes(static_cast<uint64_t>(TotalBytes(out)));
  *shared_header.mutable_shared() = push_payload;
  *shared_header.mutable_then_pull()->mutable_shared() = pull_payload;
  SendShared(
      shared_header, deadline,
      [this, header, data = std::move(data), out = std::move(out), push_bytes,
       deadline, done = std::move(done), lease = std::move(lease)](
          absl::StatusOr<PushBatchResponse> answer) mutable {
        if (!answer.ok() && IsSharedMemoryLost(answer.status())) {
          // Refused before anything was applied: resend the gradients,
          // which are still in the region, without it; the lease lives as
          // long as the resend's frame.
          OnLost(lease->session);
          std::vector<absl::Span<const float>> copies =
              PiecesAt(lease->values(), data);
          transport_->PushThenPull(header, std::move(copies), std::move(lease),
                                   std::move(out), deadline, std::move(done));
          return CallEnded();
        }
        if (!answer.ok()) {
          if (ServerMayStillUse(answer.status().code())) {
            RetirePiece(*lease, answer.status());
          }
          lease.reset();
          done(std::move(answer));
          return CallEnded();
        }
        CopyOut(
            reinterpret_cast<const float*>(
                reinterpret_cast<const char*>(lease->values()) + push_bytes),
            out);
        bytes_copied_.fetch_add(TotalBytes(out), std::memory_order_relaxed);
        lease.reset();
        done(std::move(answer));
        CallEnded();
      });
}

}  // namespace psflow
