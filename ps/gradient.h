// A chunk's gradient as a push delivers it: in one span (a worker's buffer
// in process, a server-side copy), or still in the network's receive
// buffers, where floats sit at any alignment and may straddle buffers. The
// latter is read block by block into a small per-thread buffer as the
// update consumes it, so the server never copies a TCP push's gradient
// whole before applying it (bench/RESULTS.md, issue 35).
//
// A Gradient is a view: what it reads (the span, the reader and what the
// reader reads) must outlive it. ForEachBlock may run on several threads at
// once (a chunk's update split over the apply threads) when the reader
// may; BulkFrame's may.
#ifndef PSFLOW_PS_GRADIENT_H_
#define PSFLOW_PS_GRADIENT_H_

#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace psflow {

class Gradient {
 public:
  // Fills `out` with the gradient's floats [begin, begin + out.size()).
  using Reader = absl::FunctionRef<void(int64_t begin, absl::Span<float> out)>;

  // Floats a reader is asked for at once: 64 KiB, well inside L1/L2, so
  // the update reads what the reader just wrote.
  static constexpr int64_t kBlockFloats = 16 * 1024;

  // In one span (implicit: every in-process caller has one).
  Gradient(absl::Span<const float> values)  // NOLINT(runtime/explicit)
      : size_(static_cast<int64_t>(values.size())), values_(values) {}
  // `size` floats, read by `read`.
  Gradient(int64_t size, Reader read) : size_(size), read_(read) {}

  int64_t size() const { return size_; }

  // The floats in one span, or nullopt for a read gradient.
  std::optional<absl::Span<const float>> span() const {
    if (read_.has_value()) return std::nullopt;
    return values_;
  }

  // Calls fn(at, values) over consecutive blocks that cover floats
  // [begin, end) (0 <= begin <= end <= size()), `values` being the
  // gradient's floats [at, at + values.size()): once with the whole range
  // for a span, in blocks of at most kBlockFloats for a reader. A read
  // block lives in a per-thread buffer: `fn` must not call ForEachBlock of
  // a read gradient on the same thread.
  void ForEachBlock(
      int64_t begin, int64_t end,
      absl::FunctionRef<void(int64_t, absl::Span<const float>)> fn) const;

 private:
  int64_t size_;
  absl::Span<const float> values_;
  std::optional<Reader> read_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_GRADIENT_H_
