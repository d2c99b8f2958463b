#include "common/shared_call_ring.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace psflow {

static_assert(sizeof(RingSlot) == 64, "a slot's header is one cache line");

void MakeRingThreadBatch() {
  sched_param param{};
  param.sched_priority = 0;
  // Best effort: the ring works either way (the policy needs no privilege).
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
}

void RingBell(uint32_t* bell) {
  __atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
  // Not FUTEX_PRIVATE_FLAG: the sleeper is another process mapping the
  // same memory.
  syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void RingWait(uint32_t* bell, uint32_t seen, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return;
  const timespec relative = absl::ToTimespec(timeout);
  syscall(SYS_futex, bell, FUTEX_WAIT, seen, &relative, nullptr, 0);
}

namespace {

void PutU32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

bool TakeU32(absl::string_view& in, uint32_t& value) {
  if (in.size() < sizeof(value)) return false;
  std::memcpy(&value, in.data(), sizeof(value));
  in.remove_prefix(sizeof(value));
  return true;
}

bool TakeBytes(absl::string_view& in, uint32_t size, absl::string_view& out) {
  if (in.size() < size) return false;
  out = in.substr(0, size);
  in.remove_prefix(size);
  return true;
}

}  // namespace

// Layout: payload count, each payload's url and value (length-prefixed),
// then the message's length and the message, cut to what is left.
std::string EncodeRingStatus(const absl::Status& status, int64_t capacity) {
  std::string out;
  std::string payloads;
  uint32_t count = 0;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    const std::string flat(value);
    // Payloads are short markers; one that would crowd out the
    // message is dropped.
    if (static_cast<int64_t>(payloads.size() + url.size() + flat.size()) >
        capacity / 2) {
      return;
    }
    PutU32(payloads, static_cast<uint32_t>(url.size()));
    payloads.append(url.data(), url.size());
    PutU32(payloads, static_cast<uint32_t>(flat.size()));
    payloads.append(flat);
    ++count;
  });
  PutU32(out, count);
  out.append(payloads);
  const int64_t room =
      std::max<int64_t>(0, capacity - static_cast<int64_t>(out.size()) - 4);
  const absl::string_view message = status.message().substr(
      0, static_cast<size_t>(std::min<int64_t>(room, status.message().size())));
  PutU32(out, static_cast<uint32_t>(message.size()));
  out.append(message.data(), message.size());
  return out;
}

absl::Status DecodeRingStatus(int32_t code, absl::string_view bytes) {
  if (code <= 0 || code > 16) {
    return absl::InternalError(
        absl::StrCat("the call ring answered status code ", code));
  }
  absl::Status broken =
      absl::InternalError("the call ring's answer holds a malformed status");
  uint32_t count = 0;
  if (!TakeU32(bytes, count)) return broken;
  struct Payload {
    absl::string_view url, value;
  };
  std::vector<Payload> payloads;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t size = 0;
    Payload payload;
    if (!TakeU32(bytes, size) || !TakeBytes(bytes, size, payload.url) ||
        !TakeU32(bytes, size) || !TakeBytes(bytes, size, payload.value)) {
      return broken;
    }
    payloads.push_back(payload);
  }
  uint32_t size = 0;
  absl::string_view message;
  if (!TakeU32(bytes, size) || !TakeBytes(bytes, size, message)) return broken;
  absl::Status status(static_cast<absl::StatusCode>(code), message);
  for (const Payload& payload : payloads) {
    status.SetPayload(payload.url, absl::Cord(payload.value));
  }
  return status;
}

}  // namespace psflow
