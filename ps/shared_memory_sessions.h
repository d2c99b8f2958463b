// The shared-memory regions clients on this host attached to the server
// (AttachSharedMemory in proto/ps.proto), and the checks that turn a bulk
// call's SharedPayload into memory the server may read or write.
//
// A session belongs to the caller that attached it (its name: the
// certificate's common name under mutual TLS, else its role under job
// tokens; GrpcParameterServer::AllowCaller): another caller naming it, in a
// bulk call or a detach, is refused, whatever it knows of its id.
//
// A session ends when its client detaches, when it sat unused for
// `idle_timeout` (a client that died without detaching; checked at each
// attach and, every quarter of the timeout, by calls), or with the server. A
// call naming a forgotten session fails with FailedPrecondition and the client
// attaches again.
//
// Thread-safe.
#ifndef PSFLOW_PS_SHARED_MEMORY_SESSIONS_H_
#define PSFLOW_PS_SHARED_MEMORY_SESSIONS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "common/shared_call_ring_server.h"
#include "common/shared_memory_region.h"
#include "proto/ps.pb.h"

namespace psflow {

// The largest region one client may have a server map (clients ask for
// far less: client/cluster_client.h).
inline constexpr int64_t kMaxSharedMemoryRegionBytes = int64_t{4} << 30;

class SharedMemorySessions {
 public:
  struct Options {
    // False refuses every attach: all bulk data goes over TCP.
    bool enabled = true;
    int max_sessions = 1024;
    // Sessions whose calls may also come through a call ring (each ring
    // has a thread of its own); more go over gRPC only.
    int max_rings = 64;
    absl::Duration idle_timeout = absl::Minutes(10);
  };

  // Values in a client's region, and the mapping they live in (hold it
  // while using them).
  struct Payload {
    std::shared_ptr<SharedMemoryRegion> region;
    absl::Span<float> values;
  };

  explicit SharedMemorySessions(const Options& options) : options_(options) {}

  // Opens and checks the client's region; returns its session id, a
  // session of `owner`.
  absl::StatusOr<uint64_t> Attach(const AttachSharedMemoryRequest& request,
                                  absl::string_view owner);
  // Serves the call ring the client wrote at `offset` in `session`'s
  // region with `handler`, until the session is forgotten.
  // ResourceExhausted beyond max_rings; FailedPrecondition for an unknown
  // session; InvalidArgument for a ring that is not where it should be.
  absl::Status ServeRing(
      uint64_t session, int64_t offset,
      std::shared_ptr<SharedCallRingServer::Handler> handler);

  // Forgets `caller`'s session (a no-op for an unknown one), stopping its
  // ring. PermissionDenied when the session is another caller's.
  absl::Status Detach(uint64_t session, absl::string_view caller);
  // Forgets every session, as a restarted server would have.
  void DetachAll();

  // The `expected_bytes` bytes `shared` names, in a session of `caller`.
  // FailedPrecondition for an unknown session (see IsLostSession),
  // PermissionDenied for another caller's, InvalidArgument for a range
  // that is misaligned, outside the region or of another size.
  absl::StatusOr<Payload> Resolve(const SharedPayload& shared,
                                  int64_t expected_bytes,
                                  absl::string_view caller);

  int64_t size() const;
  // Sessions with a ring, and the calls rings took (also of forgotten ones).
  int64_t rings() const;
  int64_t ring_calls() const;
  // Tensor bytes that went through shared memory.
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // The text of Resolve's unknown-session error, so that the transport can
  // tell the client (trailing metadata) to attach again.
  static bool IsLostSession(const absl::Status& status);
  // The words such an error starts with.
  static const char* LostSessionText();

 private:
  struct Session {
    std::string owner;  // the attach call's caller
    std::shared_ptr<SharedMemoryRegion> region;
    std::atomic<int64_t> last_used_ns{0};
    // Stopped (joined) when the session goes, outside mu_.
    std::unique_ptr<SharedCallRingServer> ring;
    ~Session();
    std::atomic<int64_t>* ring_calls =
        nullptr;  // where the ring's calls add up
  };

  // Drops sessions idle for longer than idle_timeout.
  void ForgetIdle();

  const Options options_;
  std::atomic<int64_t> next_sweep_ns_{0};
  mutable Mutex mu_;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  absl::BitGen ids_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> forgotten_ring_calls_{0};
};

}  // namespace psflow

#endif  // PSFLOW_PS_SHARED_MEMORY_SESSIONS_H_
