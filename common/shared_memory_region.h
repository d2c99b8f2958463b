// A memory region shared by a client and a server on the same host: the
// same-host data plane of the bulk RPCs (docs/wire-protocol.md, "Shared
// memory").
//
// The client creates the region (an anonymous memfd named after a random
// token, sealed against shrinking and growing) and tells the server its
// pid, descriptor number and token over gRPC. The server opens the same
// memory through /proc/<pid>/fd/<fd>, which only works on the same kernel,
// in the same pid namespace, with permission to read the client's
// descriptors; anything else fails and the pair keeps using TCP.
//
// The seals are why the server can map memory a client controls: a sealed
// region can never shrink under the server's mapping, and it must be plain
// shmem (not hugetlbfs, whose pool can run dry), so touching it can never
// raise SIGBUS. The server still treats the contents as untrusted input,
// which the client may change at any time: it copies a push's values once
// before checking and applying them.
//
// Layout: a header page (magic and token), then data. Offsets given to
// data() are from the region's start, so they are >= kSharedMemoryHeaderBytes.
//
// Thread-compatible; the memory itself is shared with another process, so
// its contents are untrusted input to the server.
#ifndef PSFLOW_COMMON_SHARED_MEMORY_REGION_H_
#define PSFLOW_COMMON_SHARED_MEMORY_REGION_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace psflow {

inline constexpr int64_t kSharedMemoryHeaderBytes = 4096;
// Offsets handed out in a region are multiples of this (floats, cache lines).
inline constexpr int64_t kSharedMemoryAlignment = 64;

class SharedMemoryRegion {
 public:
  // Creates a region with `data_bytes` usable bytes (after the header page).
  // Pages are allocated as they are first touched.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(
      int64_t data_bytes);

  // Maps the region another process on this host created, after checking
  // that /proc/<pid>/fd/<fd> is that region (name, seals, size, token).
  // FailedPrecondition, naming the reason, when it is not reachable;
  // PermissionDenied when another user owns it (also for a server that
  // runs as root).
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Open(
      pid_t pid, int fd, int64_t total_bytes, const std::string& token);

  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  // The whole mapping, header included.
  char* base() const { return base_; }
  int64_t total_bytes() const { return total_bytes_; }
  // The descriptor in this process (what a client sends to the server).
  int fd() const { return fd_; }
  // 32 hex characters, random per region.
  const std::string& token() const { return token_; }

 private:
  SharedMemoryRegion(int fd, char* base, int64_t total_bytes, std::string token)
      : fd_(fd),
        base_(base),
        total_bytes_(total_bytes),
        token_(std::move(token)) {}

  const int fd_;
  char* const base_;
  const int64_t total_bytes_;
  const std::string token_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_SHARED_MEMORY_REGION_H_
