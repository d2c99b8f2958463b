// Approximate counts of how often ids were seen, in fixed memory: a
// count-min sketch (four rows of saturating 16-bit counters, conservative
// update), used by an embedding table to admit only ids seen at least
// min_frequency times. It never undercounts, so a frequent id is always
// admitted; a collision can only admit a rare id early. Counts halve once
// the sketch has taken 8 increments per counter, so ids that were
// frequent long ago age out (the "reset" of TinyLFU).
//
// Thread-compatible: the table's stripe lock guards it.
#ifndef PSFLOW_PS_ADMISSION_SKETCH_H_
#define PSFLOW_PS_ADMISSION_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace psflow {

class AdmissionSketch {
 public:
  // `width` counters per row (rounded up to a power of two, at least 64).
  explicit AdmissionSketch(int64_t width);

  // Counts one sighting of `id`; returns its estimated count after it.
  int64_t Add(int64_t id);

  // The estimated count without counting.
  int64_t Estimate(int64_t id) const;

  int64_t bytes() const {
    return static_cast<int64_t>(counters_.size() * sizeof(uint16_t));
  }

 private:
  static constexpr int kRows = 4;
  size_t Slot(int row, int64_t id) const;
  void Halve();

  std::vector<uint16_t> counters_;  // kRows x width_
  uint64_t width_ = 0;
  int64_t additions_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_PS_ADMISSION_SKETCH_H_
