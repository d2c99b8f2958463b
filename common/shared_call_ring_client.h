// The client's end of a call ring (common/shared_call_ring.h): posts
// requests into slots of its own shared-memory region and delivers the
// server's answers from a thread of its own.
//
// A call ends exactly once: with the server's answer; DeadlineExceeded at
// its deadline; Cancelled after CancelAll(); or, when the server stopped
// serving the ring (it closed it, or its heartbeat stood still for
// `server_silence` while calls waited), Options::never_served if the
// server never took it (the client withdraws it first, atomically, so a
// server that comes back cannot take it after all) and Unavailable if it
// did. A call that ended without the server's answer after the server
// took it keeps its slot until the server answers it (the server may still
// be serving it), and the ring that lost its server takes no more calls:
// Call() returns false and the caller uses another transport.
//
// A server's end is noticed by its heartbeat standing still, and at once
// when its descriptor of the region closes (Options::region_fd).
//
// Thread-safe. `done` runs on the ring's thread (never inside Call()).
#ifndef PSFLOW_COMMON_SHARED_CALL_RING_CLIENT_H_
#define PSFLOW_COMMON_SHARED_CALL_RING_CLIENT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/shared_call_ring.h"

namespace psflow {

class SharedCallRingClient {
 public:
  using Done = std::function<void(absl::StatusOr<std::string>)>;

  struct Options {
    // Named in errors: "ps-0 at 127.0.0.1:4000".
    std::string server_name;
    // How long the server's heartbeat may stand still while calls wait
    // before they end Unavailable.
    absl::Duration server_silence = absl::Seconds(15);
    // How a call ends that the server never took from a ring that lost
    // its server (it is withdrawn, so it may be sent another way).
    absl::Status never_served =
        absl::UnavailableError("the call ring lost its server");
    // A descriptor of the region in this process, or -1. A server keeps
    // its own descriptor of the region open while it maps it, so a close
    // of one (inotify), followed by a second of the heartbeat standing
    // still, says that the server's process ended: the ring is lost then,
    // without waiting out `server_silence`. Watched from construction on.
    int region_fd = -1;
  };

  // Writes a fresh ring (kRingBytes of zeroed memory) at `ring` and starts
  // the thread that delivers answers; the memory must outlive this object.
  SharedCallRingClient(char* ring, Options options);
  // Calls still in flight end Cancelled first.
  ~SharedCallRingClient();
  SharedCallRingClient(const SharedCallRingClient&) = delete;
  SharedCallRingClient& operator=(const SharedCallRingClient&) = delete;

  // Posts a call and takes `done`; returns false, leaving `done` as it
  // was, when the request does not fit a slot, every slot is busy, or the
  // ring lost its server.
  bool Call(uint32_t method, absl::string_view request, absl::Time deadline,
            Done& done);

  // Every call in flight ends Cancelled soon (on the ring's thread), and
  // the server is asked to stop waiting for it.
  void CancelAll();

  // Whether the ring takes calls (it has not lost its server).
  bool usable() const { return !lost_.load(std::memory_order_acquire); }
  // Calls that got the server's answer.
  int64_t calls_answered() const {
    return answered_.load(std::memory_order_relaxed);
  }

 private:
  struct InFlight {
    bool busy = false;  // the slot holds a call the server has not answered
    Done done;          // null once the call ended without the answer
    bool cancelled = false;  // CancelAll() asked it to end
    absl::Time deadline = absl::InfiniteFuture();
  };

  void Loop();

  char* const ring_;
  const Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> answered_{0};
  int inotify_ = -1;  // watches region_fd's closes; -1 without
  // Loop's own: when a close of the region's descriptor was seen, and the
  // heartbeat then.
  std::optional<absl::Time> released_at_;
  uint64_t released_beat_ = 0;
  Mutex mu_;
  std::array<InFlight, kRingSlots> slots_ ABSL_GUARDED_BY(mu_);
  bool cancel_all_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_SHARED_CALL_RING_CLIENT_H_
