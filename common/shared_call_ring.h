// A call ring in a shared-memory region: how a client on the same host
// hands a server small requests and gets their answers without a socket,
// a thread of gRPC's, or TLS (docs/wire-protocol.md, "The call ring").
//
// Layout, from the ring's offset in the region (64-byte aligned):
//   RingHeader (magic, slot count, doorbells, the server's heartbeat),
//   then kRingSlots slots of kRingSlotBytes each: a RingSlot header, the
//   request bytes, the answer bytes.
//
// A slot's `state` passes FREE -> POSTED (the client wrote a request) ->
// TAKEN (the server copied it out) -> DONE (the server wrote the answer)
// -> FREE (the client read it). Each side rings the other's doorbell (a
// futex word it bumps) after a change, and the other sleeps on it.
//
// The server copies every field it reads out of the slot once and checks
// it: the client may change the memory at any time, and can only hurt its
// own calls by doing so.
#ifndef PSFLOW_COMMON_SHARED_CALL_RING_H_
#define PSFLOW_COMMON_SHARED_CALL_RING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow {

inline constexpr uint32_t kRingMagic = 0x31727370;  // "psr1"
inline constexpr int kRingSlots = 16;
inline constexpr int64_t kRingRequestBytes = int64_t{16} << 10;
inline constexpr int64_t kRingAnswerBytes = int64_t{32} << 10;

enum RingSlotState : uint32_t {
  kRingSlotFree = 0,
  kRingSlotPosted = 1,
  kRingSlotTaken = 2,
  kRingSlotDone = 3,
};

// Written by the client before it offers the ring; the doorbells and the
// heartbeat change while calls run.
struct alignas(64) RingHeader {
  uint32_t magic;
  uint32_t slots;
  // The client bumps it after posting; the server sleeps on it.
  alignas(64) uint32_t server_bell;
  // The server bumps it after answering; the client sleeps on it.
  alignas(64) uint32_t client_bell;
  // Bumped by the server each time it looks at the ring (at least every
  // kRingServerTick while it serves): how the client tells a live server
  // from a dead one.
  alignas(64) uint64_t server_heartbeat;
  // Set by a server that stopped serving this ring (it forgot the session,
  // or shuts down) once every call it took was answered.
  uint32_t server_closed;
};

struct alignas(64) RingSlot {
  uint32_t state;   // RingSlotState
  uint32_t cancel;  // set by the client: stop waiting, answer now
  uint32_t method;  // what the request is; the server's handler says
  uint32_t request_bytes;
  int64_t deadline_unix_ns;  // the client's deadline for this call
  // The answer: a status code (0 OK), then answer_bytes bytes of answer:
  // for OK the handler's reply, otherwise EncodeRingStatus's bytes.
  int32_t code;
  uint32_t answer_bytes;
};

inline constexpr int64_t kRingSlotBytes =
    sizeof(RingSlot) + kRingRequestBytes + kRingAnswerBytes;
// The bytes a ring takes in a region (a whole number of pages).
inline constexpr int64_t kRingBytes =
    (sizeof(RingHeader) + kRingSlots * kRingSlotBytes + 4095) / 4096 * 4096;

// How often a serving ring's thread wakes up when nothing happens.
inline constexpr absl::Duration kRingServerTick = absl::Milliseconds(100);

inline RingHeader* RingHeaderAt(char* ring) {
  return reinterpret_cast<RingHeader*>(ring);
}
inline RingSlot* RingSlotAt(char* ring, int i) {
  return reinterpret_cast<RingSlot*>(ring + sizeof(RingHeader) +
                                     i * kRingSlotBytes);
}
inline char* RingRequestAt(char* ring, int i) {
  return reinterpret_cast<char*>(RingSlotAt(ring, i)) + sizeof(RingSlot);
}
inline char* RingAnswerAt(char* ring, int i) {
  return RingRequestAt(ring, i) + kRingRequestBytes;
}

// Atomic access to words the other process shares.
inline uint32_t RingLoad(const uint32_t* word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}
inline void RingStore(uint32_t* word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}
inline bool RingExchange(uint32_t* word, uint32_t expected, uint32_t desired) {
  return __atomic_compare_exchange_n(word, &expected, desired, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// Makes the calling thread (a ring's) SCHED_BATCH: ringing its doorbell
// then never preempts the thread that rang it. Without this, a worker's
// training thread that posts a push is often switched out on the spot for
// the server's ring thread (CFS wake-up preemption on the same core), and
// the server's apply runs instead of the worker's next step rather than
// beside it on the other core. A batch thread still runs at once on an
// idle core, and otherwise within a tick.
void MakeRingThreadBatch();

// Bumps a doorbell and wakes whoever sleeps on it.
void RingBell(uint32_t* bell);
// Sleeps while *bell == seen, at most `timeout` (spurious returns are
// fine: callers look again).
void RingWait(uint32_t* bell, uint32_t seen, absl::Duration timeout);

// A non-OK status with its message and payloads, in at most `capacity`
// bytes (the message is cut to fit), and back.
std::string EncodeRingStatus(const absl::Status& status, int64_t capacity);
absl::Status DecodeRingStatus(int32_t code, absl::string_view bytes);

}  // namespace psflow

#endif  // PSFLOW_COMMON_SHARED_CALL_RING_H_
