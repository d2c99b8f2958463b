// The server's end of a call ring (common/shared_call_ring.h): a thread
// that takes the calls a client posts in its shared-memory region, hands
// each to a Handler, and writes the answers back.
//
// A call that waits (a pull for a step not yet applied) is answered by
// the handler later, from any thread; the ring asks the handler to stop
// waiting at the call's deadline or when the client cancels it.
//
// Stopping (the destructor) answers every call posted and not taken with
// the handler's Closed() status, cancels the calls still waiting, and
// marks the ring closed once each has its answer, so that a client never
// waits on a server that stopped serving it.
//
// Thread-safe.
#ifndef PSFLOW_COMMON_SHARED_CALL_RING_SERVER_H_
#define PSFLOW_COMMON_SHARED_CALL_RING_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/shared_memory_region.h"

namespace psflow {

class SharedCallRingServer {
 public:
  // Answers one call, exactly once, from any thread: an OK status with the
  // answer's bytes, or an error (its bytes are ignored).
  using Reply = std::function<void(const absl::Status&, std::string)>;

  class Handler {
   public:
    virtual ~Handler() = default;
    // Serves one call whose request bytes the client can no longer change.
    // Returns how to make a waiting call answer now (null when it never
    // waits or was answered already).
    virtual std::function<void()> Serve(uint32_t method, std::string request,
                                        absl::Time deadline, Reply reply) = 0;
    // The status of a call posted after the server stopped serving the ring.
    virtual absl::Status Closed() = 0;
  };

  // Checks the ring at `offset` in `region` (inside it, aligned, with the
  // client's magic and slot count written), then serves it.
  static absl::StatusOr<std::unique_ptr<SharedCallRingServer>> Start(
      std::shared_ptr<SharedMemoryRegion> region, int64_t offset,
      std::shared_ptr<Handler> handler);

  ~SharedCallRingServer();
  SharedCallRingServer(const SharedCallRingServer&) = delete;
  SharedCallRingServer& operator=(const SharedCallRingServer&) = delete;

  // Calls taken so far.
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }

  // Whether the caller runs on a ring's thread (inside a handler's Serve),
  // where a ring must not be stopped: its destructor would wait for itself.
  static bool OnRingThread();

 private:
  struct Shared;
  explicit SharedCallRingServer(std::shared_ptr<Shared> shared);
  void Loop();
  // Copies slot `i`'s call out and hands it to the handler.
  void Take(int i);

  const std::shared_ptr<Shared> shared_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> calls_{0};
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_SHARED_CALL_RING_SERVER_H_
