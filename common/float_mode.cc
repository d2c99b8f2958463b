#include "common/float_mode.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace psflow {
namespace {

// Set once this thread's mode is known to be on; DisableFlushToZero clears
// it, so a thread that turned the mode off gets it back on the next call.
thread_local bool flush_to_zero_set = false;

#if defined(__aarch64__)
constexpr uint64_t kFpcrFlushToZero = uint64_t{1} << 24;  // FPCR.FZ

uint64_t ReadFpcr() {
  uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  return fpcr;
}

void WriteFpcr(uint64_t fpcr) { asm volatile("msr fpcr, %0" : : "r"(fpcr)); }
#endif

}  // namespace

void EnableFlushToZero() {
  if (flush_to_zero_set) return;
#if defined(__x86_64__) || defined(__i386__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#elif defined(__aarch64__)
  // AArch64's FZ covers both inputs and results.
  WriteFpcr(ReadFpcr() | kFpcrFlushToZero);
#endif
  flush_to_zero_set = true;
}

bool FlushToZeroEnabled() {
#if defined(__x86_64__) || defined(__i386__)
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON &&
         _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
#elif defined(__aarch64__)
  return (ReadFpcr() & kFpcrFlushToZero) != 0;
#else
  return false;
#endif
}

void DisableFlushToZero() {
#if defined(__x86_64__) || defined(__i386__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_OFF);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_OFF);
#elif defined(__aarch64__)
  WriteFpcr(ReadFpcr() & ~kFpcrFlushToZero);
#endif
  flush_to_zero_set = false;
}

}  // namespace psflow
