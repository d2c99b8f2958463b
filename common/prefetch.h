// Cache prefetch hints, for loops over memory far larger than the cache
// that know a few iterations ahead what they will touch (hash-table slots,
// rows): issuing the loads early lets their misses overlap instead of
// waiting one after the other. Hints only: nothing changes if the address
// is never used, and any address is allowed (a prefetch never faults).
//
// On x86-64 the instructions are written out: GCC 12 at -O2 and above
// deletes some __builtin_prefetch calls once inlined (seen with an address
// computed through a multiply-xorshift hash, ps/row_index.h), silently.
//
// Thread-safe (no state).
#ifndef PSFLOW_COMMON_PREFETCH_H_
#define PSFLOW_COMMON_PREFETCH_H_

namespace psflow {

// The line holding `p`, into every cache level, for reading.
inline void PrefetchForRead(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, /*rw=*/0, /*locality=*/3);
#endif
}

// The same, for a line about to be written (x86-64 has no separate hint
// before Broadwell's PREFETCHW, which x86-64-v3 does not promise).
inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, /*rw=*/1, /*locality=*/3);
#endif
}

}  // namespace psflow

#endif  // PSFLOW_COMMON_PREFETCH_H_
