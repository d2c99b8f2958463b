#include "ps/admission_sketch.h"

#include <algorithm>

#include "common/splitmix64.h"

namespace psflow {
namespace {

uint64_t RoundUpToPowerOfTwo(int64_t n) {
  uint64_t width = 64;
  while (width < static_cast<uint64_t>(n)) width <<= 1;
  return width;
}

}  // namespace

AdmissionSketch::AdmissionSketch(int64_t width)
    : counters_(kRows * RoundUpToPowerOfTwo(width)),
      width_(RoundUpToPowerOfTwo(width)) {}

size_t AdmissionSketch::Slot(int row, int64_t id) const {
  const uint64_t h = SplitMix64Mix(static_cast<uint64_t>(id) +
                                   0x9e3779b97f4a7c15ull * (row + 1));
  return row * width_ + (h & (width_ - 1));
}

int64_t AdmissionSketch::Estimate(int64_t id) const {
  uint16_t least = UINT16_MAX;
  for (int r = 0; r < kRows; ++r)
    least = std::min(least, counters_[Slot(r, id)]);
  return least;
}

int64_t AdmissionSketch::Add(int64_t id) {
  size_t slots[kRows];
  uint16_t least = UINT16_MAX;
  for (int r = 0; r < kRows; ++r) {
    slots[r] = Slot(r, id);
    least = std::min(least, counters_[slots[r]]);
  }
  if (least == UINT16_MAX) return least;  // saturated
  // Conservative update: raise only the counters at the minimum.
  for (size_t slot : slots) {
    if (counters_[slot] == least) ++counters_[slot];
  }
  if (++additions_ >= static_cast<int64_t>(8 * width_)) Halve();
  return least + 1;
}

void AdmissionSketch::Halve() {
  for (uint16_t& c : counters_) c >>= 1;
  additions_ = 0;
}

}  // namespace psflow
