// Flush-to-zero (FTZ) and denormals-are-zero (DAZ) for float math.
//
// Why: x86 CPUs take a microcode assist, some 100 cycles, for each
// arithmetic operation that reads or produces a subnormal float (|x| <
// 1.2e-38). Training produces them as a matter of course: Adam's first
// moment for an input that is almost always 0 (Fashion-MNIST's border
// pixels) decays by 0.9 a step into the subnormal range and stays there.
// The default job's parameter server spent 36% of its CPU in Adam on 17%
// subnormal slots, 14x the cost of normal values, and its workers waited
// on it for 73% of each step. With FTZ and DAZ those values count as 0,
// which changes no result that matters (they are below 1e-38 next to
// weights of order 1e-2) and keeps every operation at full speed; it is
// what TensorFlow and PyTorch set on their CPU compute threads.
//
// The mode is a per-thread register (MXCSR on x86-64, FPCR on AArch64)
// that new threads inherit from the thread that creates them (POSIX):
// every role sets it first thing in main(), before any thread starts, and
// the parameter server's apply paths set it again on whatever thread runs
// them (gRPC may have created its threads from another one); thread pools
// (the CPU device's, the server's apply threads) set it on each of their
// threads when it starts. On other CPUs these calls do nothing.
//
// Thread-safe: each call affects the calling thread only.
#ifndef PSFLOW_COMMON_FLOAT_MODE_H_
#define PSFLOW_COMMON_FLOAT_MODE_H_

namespace psflow {

// Sets FTZ and DAZ on the calling thread. Cheap after the first call on a
// thread (a thread-local flag), so hot paths may call it every time.
void EnableFlushToZero();

// Whether the calling thread flushes subnormals to zero (FTZ and DAZ both
// set); false on CPUs without the mode.
bool FlushToZeroEnabled();

// Clears both on the calling thread (benchmarks measuring the cliff, and
// tests).
void DisableFlushToZero();

}  // namespace psflow

#endif  // PSFLOW_COMMON_FLOAT_MODE_H_
