#include "data/synth_ctr_source.h"

#include <cmath>

#include "common/splitmix64.h"
#include "data/ctr_examples.h"

namespace psflow {
namespace {

constexpr uint64_t kHexSalt = 0x68657876616c7565ull;    // "hexvalue"
constexpr uint64_t kDenseSalt = 0x64656e73656d7521ull;  // "densemu!"
// Spread of the integer columns' log-normal, in e-folds.
constexpr double kDenseSpread = 1.2;

// MurmurHash3's 32-bit finalizer: a bijection of 32-bit values.
uint32_t Mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Writes `value` in decimal at `p`; returns the end.
char* WriteDecimal(int64_t value, char* p) {
  uint64_t magnitude = static_cast<uint64_t>(value);
  if (value < 0) {
    *p++ = '-';
    magnitude = 0 - magnitude;
  }
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}

}  // namespace

double SynthCtrSource::Uniform(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

double SynthCtrSource::Normal(uint64_t& state) {
  // Box-Muller with u1 in (0, 1]; one of the pair is used.
  const double u1 = 1 - Uniform(state);
  const double u2 = Uniform(state);
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

SynthCtrSource::SynthCtrSource(const SynthCtrOptions& options)
    : options_(options), vocabularies_(SynthCtrFieldVocabularies(options)) {
  first_value_.push_back(0);
  for (int f = 0; f < options.num_fields; ++f) {
    first_value_.push_back(first_value_.back() + vocabularies_[f]);
    samplers_.emplace_back(vocabularies_[f], options.zipf);
    hex_keys_.push_back(static_cast<uint32_t>(
        SplitMix64Mix(options.seed ^ kHexSalt ^ (uint64_t(f) << 32))));
  }
  const uint64_t dense_key = SplitMix64Mix(options.seed ^ kDenseSalt);
  for (int d = 0; d < options.num_dense; ++d) {
    uint64_t state = dense_key + uint64_t(d);
    dense_mu_.push_back(0.5 + 3.5 * Uniform(state));
  }
}

uint32_t SynthCtrSource::HexValue(int field, int64_t k) const {
  return Mix32(static_cast<uint32_t>(k) ^ hex_keys_[field]);
}

void SynthCtrSource::Draw(uint64_t& state, Example& example) const {
  const int num_dense = options_.num_dense;
  const int num_fields = options_.num_fields;
  example.dense_values.resize(num_dense);
  example.dense_missing.resize(num_dense);
  example.dense.resize(num_dense);
  example.values.resize(num_fields);
  example.ids.clear();
  for (int d = 0; d < num_dense; ++d) {
    example.dense_missing[d] = Uniform(state) < options_.missing;
    if (example.dense_missing[d]) {
      example.dense[d] = 0;
      continue;
    }
    // At most exp(4 + 1.2 * 8.6) ~ 1.7e6: Normal's magnitude is below 8.6.
    const int64_t x =
        static_cast<int64_t>(
            std::floor(std::exp(dense_mu_[d] + kDenseSpread * Normal(state)))) -
        1;
    example.dense_values[d] = x;
    example.dense[d] = CtrDenseFeature(x);
  }
  for (int f = 0; f < num_fields; ++f) {
    if (Uniform(state) < options_.missing) {
      example.values[f] = -1;
      continue;
    }
    const int64_t k = samplers_[f].Sample(state) - 1;
    example.values[f] = k;
    example.ids.push_back(CtrFeatureId(f, HexValue(f, k)));
  }
}

void SynthCtrSource::AppendLine(const Example& example, int label,
                                std::string& text) const {
  static constexpr char kHex[] = "0123456789abcdef";
  // Longest line: label, 20 characters per integer, 8 per value, tabs.
  const size_t at = text.size();
  text.resize(at + 2 + 21 * options_.num_dense + 9 * options_.num_fields);
  char* p = text.data() + at;
  *p++ = label ? '1' : '0';
  for (int d = 0; d < options_.num_dense; ++d) {
    *p++ = '\t';
    if (!example.dense_missing[d]) {
      p = WriteDecimal(example.dense_values[d], p);
    }
  }
  for (int f = 0; f < options_.num_fields; ++f) {
    *p++ = '\t';
    if (example.values[f] < 0) continue;
    const uint32_t value = HexValue(f, example.values[f]);
    for (int shift = 28; shift >= 0; shift -= 4) {
      *p++ = kHex[(value >> shift) & 0xf];
    }
  }
  *p++ = '\n';
  text.resize(p - text.data());
}

}  // namespace psflow
