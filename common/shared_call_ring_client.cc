#include "common/shared_call_ring_client.h"

#include <pthread.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psflow {

namespace {
// How long the heartbeat must stand still after a close of the region's
// descriptor for the server to count as gone (ten of its ticks).
constexpr absl::Duration kReleasedSilence = absl::Seconds(1);
}  // namespace

SharedCallRingClient::SharedCallRingClient(char* ring, Options options)
    : ring_(ring), options_(std::move(options)) {
  // The memory may have served calls before (a piece of a region reused):
  // every word the two sides read starts at zero.
  std::memset(ring_, 0, sizeof(RingHeader));
  for (int i = 0; i < kRingSlots; ++i) {
    std::memset(RingSlotAt(ring_, i), 0, sizeof(RingSlot));
  }
  RingHeader* header = RingHeaderAt(ring_);
  header->magic = kRingMagic;
  header->slots = kRingSlots;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  if (options_.region_fd >= 0) {
    inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_ >= 0 &&
        inotify_add_watch(
            inotify_,
            absl::StrCat("/proc/self/fd/", options_.region_fd).c_str(),
            IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) < 0) {
      close(inotify_);  // the heartbeat still tells
      inotify_ = -1;
    }
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "call_ring");
    MakeRingThreadBatch();
    Loop();
  });
}

SharedCallRingClient::~SharedCallRingClient() {
  stop_.store(true, std::memory_order_release);
  RingBell(&RingHeaderAt(ring_)->client_bell);
  thread_.join();
  std::vector<Done> ended;
  {
    MutexLock lock(&mu_);
    for (int i = 0; i < kRingSlots; ++i) {
      InFlight& call = slots_[i];
      if (call.busy && call.done) {
        RingStore(&RingSlotAt(ring_, i)->cancel, 1);
        ended.push_back(std::move(call.done));
      }
    }
  }
  if (!ended.empty()) RingBell(&RingHeaderAt(ring_)->server_bell);
  if (inotify_ >= 0) close(inotify_);
  for (Done& done : ended) {
    done(absl::CancelledError(
        absl::StrCat("call to ", options_.server_name,
                     " cancelled: the client closed its call ring")));
  }
}

bool SharedCallRingClient::Call(uint32_t method, absl::string_view request,
                                absl::Time deadline, Done& done) {
  if (!usable() || static_cast<int64_t>(request.size()) > kRingRequestBytes) {
    return false;
  }
  int i = 0;
  {
    MutexLock lock(&mu_);
    if (!usable()) return false;
    while (i < kRingSlots && slots_[i].busy) ++i;
    if (i == kRingSlots) return false;
    slots_[i].busy = true;
    slots_[i].cancelled = false;
    slots_[i].deadline = deadline;
    slots_[i].done = std::move(done);
  }
  RingSlot* slot = RingSlotAt(ring_, i);
  std::memcpy(RingRequestAt(ring_, i), request.data(), request.size());
  slot->cancel = 0;
  slot->method = method;
  slot->request_bytes = static_cast<uint32_t>(request.size());
  slot->deadline_unix_ns =
      deadline == absl::InfiniteFuture() ? 0 : absl::ToUnixNanos(deadline);
  RingStore(&slot->state, kRingSlotPosted);
  RingBell(&RingHeaderAt(ring_)->server_bell);
  return true;
}

void SharedCallRingClient::CancelAll() {
  {
    MutexLock lock(&mu_);
    for (InFlight& call : slots_) {
      if (call.busy && call.done) call.cancelled = true;
    }
  }
  RingBell(&RingHeaderAt(ring_)->client_bell);  // wakes Loop
}

void SharedCallRingClient::Loop() {
  RingHeader* header = RingHeaderAt(ring_);
  uint64_t last_beat =
      __atomic_load_n(&header->server_heartbeat, __ATOMIC_ACQUIRE);
  absl::Time last_beat_change = absl::Now();
  while (!stop_.load(std::memory_order_acquire)) {
    const uint32_t seen = RingLoad(&header->client_bell);
    const absl::Time now = absl::Now();
    const uint64_t beat =
        __atomic_load_n(&header->server_heartbeat, __ATOMIC_ACQUIRE);
    if (beat != last_beat) {
      last_beat = beat;
      last_beat_change = now;
    }
    // Read before the slots: a server closes only after answering all.
    const bool closed = RingLoad(&header->server_closed) != 0;
    // A descriptor of the region closed: most likely the server's, as its
    // process ended (or it let the region go after closing the ring); but
    // another process of this user may have opened it and let it go. So
    // it counts once the heartbeat then stands still for kReleasedSilence;
    // a heartbeat after the close clears it.
    if (inotify_ >= 0) {
      char events[4096];
      if (read(inotify_, events, sizeof(events)) > 0) {
        released_at_ = now;
        released_beat_ = beat;
      }
    }
    if (released_at_.has_value() && beat != released_beat_) {
      released_at_.reset();
    }
    const bool released =
        released_at_.has_value() && now - *released_at_ > kReleasedSilence;
    absl::Time next = now + kRingServerTick;
    bool wake_server = false;
    std::vector<std::pair<Done, absl::StatusOr<std::string>>> ready;
    {
      MutexLock lock(&mu_);
      bool waiting = false;
      for (int i = 0; i < kRingSlots; ++i) {
        InFlight& call = slots_[i];
        if (!call.busy) continue;
        RingSlot* slot = RingSlotAt(ring_, i);
        if (RingLoad(&slot->state) == kRingSlotDone) {
          const uint32_t bytes = std::min<uint32_t>(
              slot->answer_bytes, static_cast<uint32_t>(kRingAnswerBytes));
          const absl::string_view answer(RingAnswerAt(ring_, i), bytes);
          absl::StatusOr<std::string> result =
              slot->code == 0 ? absl::StatusOr<std::string>(std::string(answer))
                              : absl::StatusOr<std::string>(
                                    DecodeRingStatus(slot->code, answer));
          RingStore(&slot->state, kRingSlotFree);
          if (call.done) {
            ready.emplace_back(std::move(call.done), std::move(result));
            answered_.fetch_add(1, std::memory_order_relaxed);
          }
          call = InFlight();
          continue;
        }
        waiting = true;
        if (!call.done) continue;  // ended already; the slot waits
        absl::Status ended;
        if (call.cancelled) {
          ended = absl::CancelledError(
              absl::StrCat("call to ", options_.server_name, " cancelled"));
        } else if (call.deadline <= now) {
          ended = absl::DeadlineExceededError(absl::StrCat(
              "call to ", options_.server_name,
              " through the call ring in shared memory: deadline exceeded"));
        }
        if (!ended.ok()) {
          ready.emplace_back(std::move(call.done), ended);
          if (RingExchange(&slot->state, kRingSlotPosted, kRingSlotFree)) {
            call = InFlight();  // withdrawn before the server took it
          } else {
            RingStore(&slot->cancel, 1);
            wake_server = true;
            call.done = nullptr;
          }
        } else {
          next = std::min(next, call.deadline);
        }
      }
      const bool silent =
          waiting && now - last_beat_change > options_.server_silence;
      if (closed || silent || released) {
        lost_.store(true, std::memory_order_release);
        const absl::Status gone = absl::UnavailableError(absl::StrCat(
            options_.server_name,
            closed ? " stopped serving the call ring in shared memory"
            : released
                ? " let go of our shared memory (its process ended, or it "
                  "forgot the session)"
                : absl::StrCat(" did not serve the call ring in shared "
                               "memory for ",
                               absl::FormatDuration(options_.server_silence),
                               " (is it alive?)")));
        for (int i = 0; i < kRingSlots; ++i) {
          InFlight& call = slots_[i];
          if (!call.busy || !call.done) continue;
          if (RingExchange(&RingSlotAt(ring_, i)->state, kRingSlotPosted,
                           kRingSlotFree)) {
            ready.emplace_back(std::move(call.done), options_.never_served);
            call = InFlight();
          } else {
            ready.emplace_back(std::move(call.done), gone);
            call.done = nullptr;
          }
        }
      }
    }
    if (wake_server) RingBell(&header->server_bell);
    for (auto& [done, result] : ready) done(std::move(result));
    if (ready.empty()) RingWait(&header->client_bell, seen, next - now);
  }
}

}  // namespace psflow
