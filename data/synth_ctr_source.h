// How data/synth_ctr.h draws one synthetic CTR example and writes it as a
// Criteo text line: field vocabularies, Zipf samplers, the integer
// columns' distributions and the hex spelling of values. Randomness comes
// only from the SplitMix64 state the caller passes, so a chunk of examples
// is the same whichever thread draws it.
//
// Immutable after construction; share it between threads freely (each
// with its own Example scratch).
#ifndef PSFLOW_DATA_SYNTH_CTR_SOURCE_H_
#define PSFLOW_DATA_SYNTH_CTR_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/synth_ctr.h"
#include "data/zipf_sampler.h"

namespace psflow {

class SynthCtrSource {
 public:
  // `options` must pass CheckSynthCtrOptions.
  explicit SynthCtrSource(const SynthCtrOptions& options);

  // One example's features, reused from draw to draw.
  struct Example {
    std::vector<int64_t> dense_values;  // as written; unused when missing
    std::vector<uint8_t> dense_missing;
    std::vector<float> dense;     // CtrDenseFeature, missing -> 0
    std::vector<int64_t> values;  // value index per field, -1 when missing
    std::vector<int64_t> ids;     // the present values' ids, field by field
  };

  // Draws the features of one example (not its label).
  void Draw(uint64_t& state, Example& example) const;

  // Appends "<label>\t<integers>\t<hex values>\n".
  void AppendLine(const Example& example, int label, std::string& text) const;

  // The 32-bit value written for value index `k` of field `field`.
  uint32_t HexValue(int field, int64_t k) const;

  const std::vector<int64_t>& vocabularies() const { return vocabularies_; }
  // Where field `field`'s values start in a numbering of every field's
  // values one after another (for counting distinct values).
  int64_t FirstValueOf(int field) const { return first_value_[field]; }
  int64_t total_values() const { return first_value_.back(); }

  // A uniform double in [0, 1) and a standard normal, from `state`.
  static double Uniform(uint64_t& state);
  static double Normal(uint64_t& state);

 private:
  const SynthCtrOptions options_;
  std::vector<int64_t> vocabularies_;
  std::vector<int64_t> first_value_;  // num_fields + 1
  std::vector<ZipfSampler> samplers_;
  std::vector<uint32_t> hex_keys_;  // per field
  std::vector<double> dense_mu_;    // per integer column
};

}  // namespace psflow

#endif  // PSFLOW_DATA_SYNTH_CTR_SOURCE_H_
