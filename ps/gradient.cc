#include "ps/gradient.h"

#include <algorithm>
#include <vector>

namespace psflow {

void Gradient::ForEachBlock(
    int64_t begin, int64_t end,
    absl::FunctionRef<void(int64_t, absl::Span<const float>)> fn) const {
  if (!read_.has_value()) {
    fn(begin, values_.subspan(begin, end - begin));
    return;
  }
  // One block per thread, reused: the apply threads read their ranges of
  // one chunk at once.
  thread_local std::vector<float> block(kBlockFloats);
  for (int64_t at = begin; at < end; at += kBlockFloats) {
    const absl::Span<float> out =
        absl::MakeSpan(block).subspan(0, std::min(kBlockFloats, end - at));
    (*read_)(at, out);
    fn(at, out);
  }
}

}  // namespace psflow
