#include "common/shared_call_ring_server.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/shared_call_ring.h"

namespace psflow {

namespace {
thread_local bool on_ring_thread = false;
}  // namespace

bool SharedCallRingServer::OnRingThread() { return on_ring_thread; }

// What the ring's thread and the handler's late answers share; held by
// every answer not yet given, so a call answered after the server object
// went still finds the mapping.
struct SharedCallRingServer::Shared {
  std::shared_ptr<SharedMemoryRegion> region;
  char* ring = nullptr;
  std::shared_ptr<Handler> handler;

  // A slot taken and not answered yet.
  struct Busy {
    uint64_t generation = 0;  // 0: the slot is not ours
    std::function<void()> cancel;
    absl::Time deadline = absl::InfiniteFuture();
    bool cancelled = false;
  };
  Mutex mu;
  std::array<Busy, kRingSlots> busy ABSL_GUARDED_BY(mu);
  uint64_t next_generation ABSL_GUARDED_BY(mu) = 1;
  int busy_count ABSL_GUARDED_BY(mu) = 0;
  bool stopped ABSL_GUARDED_BY(mu) = false;

  RingHeader* header() const { return RingHeaderAt(ring); }

  // Claims slot `i` for a call just taken.
  uint64_t Claim(int i, absl::Time deadline) {
    MutexLock lock(&mu);
    busy[i].generation = next_generation++;
    busy[i].deadline = deadline;
    ++busy_count;
    return busy[i].generation;
  }

  // Writes call `generation`'s answer into slot `i` (once: a second answer
  // for the same call is dropped) and rings the client.
  void Answer(int i, uint64_t generation, const absl::Status& status,
              std::string answer) {
    bool closed = false;
    {
      MutexLock lock(&mu);
      if (busy[i].generation != generation) return;
      busy[i] = Busy();
      --busy_count;
      absl::Status written = status;
      if (written.ok() &&
          static_cast<int64_t>(answer.size()) > kRingAnswerBytes) {
        written = absl::InternalError(absl::StrCat(
            "the answer of ", answer.size(),
            " bytes does not fit the call ring's ", kRingAnswerBytes));
      }
      RingSlot* slot = RingSlotAt(ring, i);
      if (written.ok()) {
        std::memcpy(RingAnswerAt(ring, i), answer.data(), answer.size());
        slot->code = 0;
        slot->answer_bytes = static_cast<uint32_t>(answer.size());
      } else {
        const std::string bytes = EncodeRingStatus(written, kRingAnswerBytes);
        std::memcpy(RingAnswerAt(ring, i), bytes.data(), bytes.size());
        slot->code = static_cast<int32_t>(written.code());
        slot->answer_bytes = static_cast<uint32_t>(bytes.size());
      }
      RingStore(&slot->state, kRingSlotDone);
      closed = stopped && busy_count == 0;
    }
    if (closed) RingStore(&header()->server_closed, 1);
    RingBell(&header()->client_bell);
  }
};

absl::StatusOr<std::unique_ptr<SharedCallRingServer>>
SharedCallRingServer::Start(std::shared_ptr<SharedMemoryRegion> region,
                            int64_t offset, std::shared_ptr<Handler> handler) {
  if (offset < kSharedMemoryHeaderBytes || offset % 64 != 0 ||
      offset > region->total_bytes() - kRingBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a call ring at offset ", offset, " (", kRingBytes,
        " bytes) is not 64-byte aligned past the header inside the region of ",
        region->total_bytes(), " bytes"));
  }
  char* ring = region->base() + offset;
  RingHeader header;
  std::memcpy(&header, ring, sizeof(header));
  if (header.magic != kRingMagic ||
      header.slots != static_cast<uint32_t>(kRingSlots)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the call ring holds magic ", header.magic, " and ", header.slots,
        " slots; this server serves magic ", kRingMagic, " with ", kRingSlots,
        " (is the client from another psflow release?)"));
  }
  auto shared = std::make_shared<Shared>();
  shared->region = std::move(region);
  shared->ring = ring;
  shared->handler = std::move(handler);
  return std::unique_ptr<SharedCallRingServer>(
      new SharedCallRingServer(std::move(shared)));
}

SharedCallRingServer::SharedCallRingServer(std::shared_ptr<Shared> shared)
    : shared_(std::move(shared)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "call_ring");
    MakeRingThreadBatch();
    on_ring_thread = true;
    Loop();
  });
}

SharedCallRingServer::~SharedCallRingServer() {
  stop_.store(true, std::memory_order_release);
  RingBell(&shared_->header()->server_bell);
  thread_.join();
  // Every call posted and not taken is answered, every waiting one told to
  // answer now; the last answer marks the ring closed.
  std::vector<std::function<void()>> cancels;
  {
    MutexLock lock(&shared_->mu);
    shared_->stopped = true;
    for (Shared::Busy& busy : shared_->busy) {
      if (busy.generation != 0 && busy.cancel && !busy.cancelled) {
        busy.cancelled = true;
        cancels.push_back(busy.cancel);
      }
    }
  }
  for (int i = 0; i < kRingSlots; ++i) {
    RingSlot* slot = RingSlotAt(shared_->ring, i);
    bool ours = false;
    {
      MutexLock lock(&shared_->mu);
      ours = shared_->busy[i].generation != 0;
    }
    if (ours || !RingExchange(&slot->state, kRingSlotPosted, kRingSlotTaken)) {
      continue;
    }
    const uint64_t generation = shared_->Claim(i, absl::InfiniteFuture());
    shared_->Answer(i, generation, shared_->handler->Closed(), "");
  }
  for (const std::function<void()>& cancel : cancels) cancel();
  bool closed = false;
  {
    MutexLock lock(&shared_->mu);
    closed = shared_->busy_count == 0;
  }
  if (closed) {
    RingStore(&shared_->header()->server_closed, 1);
    RingBell(&shared_->header()->client_bell);
  }
}

void SharedCallRingServer::Take(int i) {
  RingSlot call;
  std::memcpy(&call, RingSlotAt(shared_->ring, i), sizeof(call));
  const absl::Time deadline = call.deadline_unix_ns <= 0
                                  ? absl::InfiniteFuture()
                                  : absl::FromUnixNanos(call.deadline_unix_ns);
  const uint64_t generation = shared_->Claim(i, deadline);
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (call.request_bytes > kRingRequestBytes) {
    shared_->Answer(i, generation,
                    absl::InvalidArgumentError(absl::StrCat(
                        "a call ring request of ", call.request_bytes,
                        " bytes; a slot holds at most ", kRingRequestBytes)),
                    "");
    return;
  }
  std::string request(RingRequestAt(shared_->ring, i), call.request_bytes);
  std::function<void()> cancel = shared_->handler->Serve(
      call.method, std::move(request), deadline,
      [shared = shared_, i, generation](const absl::Status& status,
                                        std::string answer) {
        shared->Answer(i, generation, status, std::move(answer));
      });
  if (!cancel) return;
  MutexLock lock(&shared_->mu);
  if (shared_->busy[i].generation == generation) {
    shared_->busy[i].cancel = std::move(cancel);
  }
}

void SharedCallRingServer::Loop() {
  RingHeader* header = shared_->header();
  while (!stop_.load(std::memory_order_acquire)) {
    __atomic_add_fetch(&header->server_heartbeat, 1, __ATOMIC_RELEASE);
    const uint32_t seen = RingLoad(&header->server_bell);
    bool took = false;
    for (int i = 0; i < kRingSlots; ++i) {
      RingSlot* slot = RingSlotAt(shared_->ring, i);
      if (RingLoad(&slot->state) != kRingSlotPosted) continue;
      {
        // A slot whose call we still serve is not taken again, whatever
        // the client wrote into it.
        MutexLock lock(&shared_->mu);
        if (shared_->busy[i].generation != 0) continue;
      }
      if (!RingExchange(&slot->state, kRingSlotPosted, kRingSlotTaken)) {
        continue;
      }
      took = true;
      Take(i);
    }
    // Waiting calls past their deadline, or cancelled by the client, are
    // told to answer now.
    const absl::Time now = absl::Now();
    absl::Time next = now + kRingServerTick;
    std::vector<std::function<void()>> cancels;
    {
      MutexLock lock(&shared_->mu);
      for (int i = 0; i < kRingSlots; ++i) {
        Shared::Busy& busy = shared_->busy[i];
        if (busy.generation == 0 || !busy.cancel || busy.cancelled) continue;
        if (busy.deadline <= now ||
            RingLoad(&RingSlotAt(shared_->ring, i)->cancel) != 0) {
          busy.cancelled = true;
          cancels.push_back(busy.cancel);
        } else {
          next = std::min(next, busy.deadline);
        }
      }
    }
    for (const std::function<void()>& cancel : cancels) cancel();
    if (!took && cancels.empty()) {
      RingWait(&header->server_bell, seen, next - now);
    }
  }
}

}  // namespace psflow
