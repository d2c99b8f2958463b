// Synthetic click-through-rate data with a known best answer: writes a
// train and a test file in the Criteo text format (data/criteo.h) from a
// planted logistic model (data/planted_ctr_model.h), so a CTR model can be
// scored against the best achievable AUC (docs/data.md).
//
// Field f (0-based) has its own vocabulary, spread log-uniformly from
// min(4, vocabulary) values (field 0) to `vocabulary` (the last field), as
// in real CTR logs where some fields have a handful of values and others
// millions. Values are drawn with Zipf frequencies (rank k with
// probability ~ k^-zipf); value k of field f is written as 8 lowercase hex
// digits that a bijective 32-bit mix of (seed, f, k) gives, so frequent
// values do not all look alike. Integer column d holds
// floor(exp(mu_d + 1.2 z)) - 1 for z ~ N(0, 1) (counts from -1 up with a
// heavy tail; mu_d in [0.5, 4] from the seed). Each value is missing
// (written empty) with probability `missing`. The bias is set, from a
// pilot sample, so that about `positive_rate` of the labels are 1; each
// label is drawn from the planted model's probability.
//
// The output is the same bytes for the same options, whatever `threads`.
// GenerateSynthCtr uses `threads` threads of its own; calls writing to
// different directories may run at the same time, two into one may not.
#ifndef PSFLOW_DATA_SYNTH_CTR_H_
#define PSFLOW_DATA_SYNTH_CTR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/planted_ctr_model.h"

namespace psflow {

struct SynthCtrOptions {
  std::string out_dir;  // required; created if missing
  int64_t num_train = 200000;
  int64_t num_test = 50000;
  int num_dense = 13;   // integer columns
  int num_fields = 26;  // categorical columns
  // Values of the largest field. The default gives ~1.26 million distinct
  // ids in 2 million training examples (26 fields, zipf 1.1, 5% missing).
  int64_t vocabulary = 2000000;
  double zipf = 1.1;  // exponent of the value frequencies, > 0
  double missing = 0.05;
  // Standard deviation of each categorical weight (dense: half of it).
  // With the other defaults, 0.25 gives the planted model a held-out AUC
  // of about 0.80 (Criteo's best models: about 0.80-0.81); 0.15 about
  // 0.71, 0.3 about 0.84.
  double weight_scale = 0.25;
  double positive_rate = 0.25;  // the bias is fitted to give about this
  uint64_t seed = 1;
  // train.txt.gz and test.txt.gz instead of .txt (zlib level 1: fast,
  // about 2.3 times smaller than the text).
  bool gzip = false;
  // Replace a data set already in out_dir (it is deleted first); without
  // it an existing one is AlreadyExists.
  bool overwrite = false;
  int threads = 0;  // 0: one per core
};

// The options as planted.json records them ("options": {...}): a data
// set made with the same options holds this text.
std::string SynthCtrOptionsJson(const SynthCtrOptions& options);

// Bounds of the options (CheckSynthCtrOptions).
inline constexpr int64_t kMaxSynthCtrExamples = int64_t{1} << 32;
inline constexpr int64_t kMaxSynthCtrTestExamples = int64_t{1} << 28;
inline constexpr int64_t kMaxSynthCtrColumns = 1024;
inline constexpr int64_t kMaxSynthCtrVocabulary = int64_t{1} << 28;

struct SynthCtrSummary {
  std::string train_path;
  std::string test_path;
  std::string planted_path;  // planted.json, written last
  int64_t train_examples = 0;
  int64_t test_examples = 0;
  std::vector<int64_t> field_vocabularies;
  int64_t distinct_train_ids = 0;
  double train_positive_rate = 0;
  double test_positive_rate = 0;
  double bias = 0;
  // The planted model's own scores on the test set: the best any model can
  // do. NaN when the test set holds one class only.
  double planted_test_auc = 0;
  double planted_test_log_loss = 0;
};

// InvalidArgument naming the first bad option, its bounds and the fix.
absl::Status CheckSynthCtrOptions(const SynthCtrOptions& options);

// The vocabulary of every field (see above).
std::vector<int64_t> SynthCtrFieldVocabularies(const SynthCtrOptions& options);

// The planted model of `options` with bias `bias` (SynthCtrSummary::bias).
PlantedCtrModel SynthCtrPlantedModel(const SynthCtrOptions& options,
                                     double bias);

// Writes <out_dir>/train.txt[.gz] and test.txt[.gz] (each first under a
// ".partial" name, renamed when complete), then <out_dir>/planted.json
// with the options and the summary: a data set is complete when
// planted.json is there. InvalidArgument for bad options; AlreadyExists
// when out_dir holds a data set and `overwrite` is false; the file system's
// errors otherwise (a failed run leaves no planted.json).
absl::StatusOr<SynthCtrSummary> GenerateSynthCtr(
    const SynthCtrOptions& options);

}  // namespace psflow

#endif  // PSFLOW_DATA_SYNTH_CTR_H_
