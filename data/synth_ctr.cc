#include "data/synth_ctr.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/binary_metrics.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/splitmix64.h"
#include "common/status_macros.h"
#include "data/synth_ctr_source.h"

namespace psflow {
namespace {

// Examples per unit of work; the unit of determinism too: chunk c of a
// split always starts from the same generator state.
constexpr int64_t kChunkExamples = 8192;
// Examples drawn (and not written) to fit the bias.
constexpr int64_t kPilotExamples = 32768;
constexpr int kMaxThreads = 256;

enum Split : uint64_t { kTrain = 1, kTest = 2, kPilot = 3 };

uint64_t ChunkState(uint64_t seed, Split split, int64_t chunk) {
  return SplitMix64Mix(SplitMix64Mix(seed ^ (0x73706c6974000000ull + split)) +
                       static_cast<uint64_t>(chunk));
}

// One bit per value of every field, set from many threads at once.
class ValueBitmap {
 public:
  explicit ValueBitmap(int64_t bits) : words_((bits + 63) / 64) {}
  void Set(int64_t bit) {
    words_[bit / 64].fetch_or(uint64_t{1} << (bit % 64),
                              std::memory_order_relaxed);
  }
  int64_t Count() const {
    int64_t count = 0;
    for (const auto& word : words_) {
      count += __builtin_popcountll(word.load(std::memory_order_relaxed));
    }
    return count;
  }

 private:
  std::vector<std::atomic<uint64_t>> words_;
};

struct Chunk {
  absl::Status status;
  std::string bytes;  // text, or one gzip member of it
  std::vector<uint8_t> labels;
  std::vector<float> probabilities;
};

// `text` compressed as one gzip member; members concatenate into a valid
// gzip file (RFC 1952), so chunks compress in parallel.
absl::StatusOr<std::string> GzipMember(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::ResourceExhaustedError("gzip: out of memory");
  }
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (result != Z_STREAM_END) {
    return absl::InternalError(absl::StrCat("gzip: deflate returned ", result));
  }
  return out;
}

Chunk MakeChunk(const SynthCtrSource& source, const PlantedCtrModel& model,
                uint64_t seed, Split split, int64_t chunk, int64_t count,
                bool gzip, ValueBitmap* seen) {
  Chunk out;
  uint64_t state = ChunkState(seed, split, chunk);
  SynthCtrSource::Example example;
  std::string text;
  text.reserve(count * 256);
  out.labels.reserve(count);
  out.probabilities.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    source.Draw(state, example);
    const float p = model.Probability(example.dense, example.ids);
    const int label = SynthCtrSource::Uniform(state) < p ? 1 : 0;
    source.AppendLine(example, label, text);
    out.labels.push_back(label);
    out.probabilities.push_back(p);
    if (seen == nullptr) continue;
    for (size_t f = 0; f < example.values.size(); ++f) {
      if (example.values[f] >= 0) {
        seen->Set(source.FirstValueOf(f) + example.values[f]);
      }
    }
  }
  if (!gzip) {
    out.bytes = std::move(text);
    return out;
  }
  absl::StatusOr<std::string> compressed = GzipMember(text);
  if (compressed.ok()) {
    out.bytes = *std::move(compressed);
  } else {
    out.status = compressed.status();
  }
  return out;
}

// Runs make(c) for chunks c = 0..chunks-1 on up to `threads` threads and
// consume(make(c)) on this thread in chunk order, holding at most
// 2 * threads results.
template <typename Make, typename Consume>
absl::Status ForEachChunkInOrder(int64_t chunks, int threads, Make make,
                                 Consume consume) {
  const int64_t round = 2 * static_cast<int64_t>(threads);
  for (int64_t first = 0; first < chunks; first += round) {
    const int64_t last = std::min(chunks, first + round);
    std::vector<Chunk> results(last - first);
    std::atomic<int64_t> next{first};
    auto work = [&] {
      for (int64_t c = next++; c < last; c = next++) {
        results[c - first] = make(c);
      }
    };
    if (threads == 1) {
      work();
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads && t < last - first; ++t) {
        pool.emplace_back(work);
      }
      for (std::thread& thread : pool) thread.join();
    }
    for (int64_t c = first; c < last; ++c) {
      RETURN_IF_ERROR(consume(std::move(results[c - first])));
    }
  }
  return absl::OkStatus();
}

// What writing one split gave.
struct SplitResult {
  int64_t positives = 0;
  std::vector<uint8_t> labels;       // when kept
  std::vector<float> probabilities;  // when kept
};

absl::StatusOr<SplitResult> WriteSplit(const SynthCtrSource& source,
                                       const PlantedCtrModel& model,
                                       const SynthCtrOptions& options,
                                       int threads, Split split, int64_t count,
                                       const std::string& path,
                                       ValueBitmap* seen, bool keep_scores) {
  ASSIGN_OR_RETURN(WritableFile file, WritableFile::CreateNew(path));
  SplitResult result;
  const int64_t chunks = (count + kChunkExamples - 1) / kChunkExamples;
  RETURN_IF_ERROR(ForEachChunkInOrder(
      chunks, threads,
      [&](int64_t c) {
        return MakeChunk(source, model, options.seed, split, c,
                         std::min(kChunkExamples, count - c * kChunkExamples),
                         options.gzip, seen);
      },
      [&](Chunk chunk) -> absl::Status {
        RETURN_IF_ERROR(chunk.status);
        RETURN_IF_ERROR(file.Append(chunk.bytes));
        for (uint8_t label : chunk.labels) result.positives += label;
        if (keep_scores) {
          result.labels.insert(result.labels.end(), chunk.labels.begin(),
                               chunk.labels.end());
          result.probabilities.insert(result.probabilities.end(),
                                      chunk.probabilities.begin(),
                                      chunk.probabilities.end());
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(file.Sync());
  RETURN_IF_ERROR(file.Close());
  return result;
}

// The bias that makes the mean planted probability `positive_rate` on a
// pilot sample (the same for every run with the same options).
double FitBias(const SynthCtrSource& source, const SynthCtrOptions& options) {
  const PlantedCtrModel unbiased = SynthCtrPlantedModel(options, 0);
  std::vector<double> logits;
  SynthCtrSource::Example example;
  uint64_t state = ChunkState(options.seed, kPilot, 0);
  for (int64_t i = 0; i < kPilotExamples; ++i) {
    source.Draw(state, example);
    logits.push_back(unbiased.Logit(example.dense, example.ids));
  }
  // The mean probability rises with the bias: bisect.
  double low = -60, high = 60;
  for (int step = 0; step < 80; ++step) {
    const double bias = (low + high) / 2;
    double sum = 0;
    for (double logit : logits) sum += PlantedCtrModel::Sigmoid(bias + logit);
    (sum / logits.size() < options.positive_rate ? low : high) = bias;
  }
  return (low + high) / 2;
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string PlantedJson(const SynthCtrOptions& options,
                        const SynthCtrSummary& summary) {
  auto base = [](const std::string& path) {
    return JsonQuote(path.substr(path.rfind('/') + 1));
  };
  return absl::StrCat(
      "{\n  \"format\": \"criteo-text\",\n  \"train\": ",
      base(summary.train_path), ",\n  \"test\": ", base(summary.test_path),
      ",\n  \"options\": ", SynthCtrOptionsJson(options),
      ",\n  \"field_vocabularies\": [",
      absl::StrJoin(summary.field_vocabularies, ", "),
      "],\n  \"id\": \"(field << 48) | (SplitMix64Mix(hex value) & "
      "(2^48 - 1))\",\n  \"dense_feature\": \"log(1 + max(x, 0))\",\n"
      "  \"bias\": ",
      absl::StrFormat("%.17g", summary.bias),
      ",\n  \"distinct_train_ids\": ", summary.distinct_train_ids,
      ",\n  \"train_positive_rate\": ", JsonNumber(summary.train_positive_rate),
      ",\n  \"test_positive_rate\": ", JsonNumber(summary.test_positive_rate),
      ",\n  \"planted_test_auc\": ", JsonNumber(summary.planted_test_auc),
      ",\n  \"planted_test_log_loss\": ",
      JsonNumber(summary.planted_test_log_loss), "\n}\n");
}

// Makes room for a new data set in `dir`: AlreadyExists when one is there
// and overwriting was not asked for; otherwise deletes it (planted.json
// first, so a crash in between leaves an incomplete set, not an old
// complete one) and any leftover ".partial" files.
absl::Status ClearDataSet(const std::string& dir, bool overwrite) {
  const std::vector<std::string> names = {
      "planted.json", "train.txt", "train.txt.gz", "test.txt", "test.txt.gz"};
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, "/", name);
    // A link counts, even one whose target is gone (an unmounted share).
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (!overwrite) {
      return absl::AlreadyExistsError(absl::StrCat(
          path,
          " exists: the directory already holds a data set; choose another "
          "directory, or overwrite it (psctl data synth-ctr --overwrite)"));
    }
    RETURN_IF_ERROR(RemoveRecursively(path));
  }
  for (const std::string& name : names) {
    RETURN_IF_ERROR(
        RemoveRecursively(absl::StrCat(dir, "/", name, ".partial")));
  }
  return absl::OkStatus();
}

// InvalidArgument unless low <= value <= high (NaN is outside).
template <typename T>
absl::Status CheckRange(const char* name, T value, T low, T high,
                        const char* hint) {
  if (value >= low && value <= high) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("synthetic CTR data: ", name, " is ", value, "; use ", low,
                   " to ", high, " (", hint, ")"));
}

}  // namespace

absl::Status CheckSynthCtrOptions(const SynthCtrOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError(
        "synthetic CTR data: no output directory; give one (--out_dir)");
  }
  RETURN_IF_ERROR(
      CheckRange<int64_t>("the number of training examples", options.num_train,
                          1, kMaxSynthCtrExamples, "--train_examples"));
  RETURN_IF_ERROR(CheckRange<int64_t>(
      "the number of test examples", options.num_test, 1,
      kMaxSynthCtrTestExamples,
      "--test_examples; the test set's scores are held in memory"));
  RETURN_IF_ERROR(CheckRange<int64_t>("the number of integer columns",
                                      options.num_dense, 0, kMaxSynthCtrColumns,
                                      "--dense; Criteo: 13"));
  RETURN_IF_ERROR(CheckRange<int64_t>(
      "the number of categorical fields", options.num_fields, 1,
      kMaxSynthCtrColumns, "--fields; Criteo: 26"));
  RETURN_IF_ERROR(CheckRange<int64_t>(
      "the vocabulary", options.vocabulary, 1, kMaxSynthCtrVocabulary,
      "--vocabulary, the number of values of the largest field"));
  RETURN_IF_ERROR(CheckRange<double>(
      "the Zipf exponent", options.zipf, 0.01, 10,
      "--zipf; real logs are near 1.05 to 1.2, larger is more skewed"));
  RETURN_IF_ERROR(CheckRange<double>("the missing-value probability",
                                     options.missing, 0, 0.99, "--missing"));
  RETURN_IF_ERROR(CheckRange<double>("the weight scale", options.weight_scale,
                                     0, 10, "--weight_scale"));
  RETURN_IF_ERROR(CheckRange<double>("the positive rate", options.positive_rate,
                                     0.001, 0.999, "--positive_rate"));
  RETURN_IF_ERROR(CheckRange<int64_t>("the number of threads", options.threads,
                                      0, kMaxThreads,
                                      "--threads; 0 takes one per core"));
  return absl::OkStatus();
}

std::vector<int64_t> SynthCtrFieldVocabularies(const SynthCtrOptions& options) {
  const double smallest =
      std::min<double>(4, static_cast<double>(options.vocabulary));
  const double largest = static_cast<double>(options.vocabulary);
  std::vector<int64_t> vocabularies;
  for (int f = 0; f < options.num_fields; ++f) {
    const double t =
        options.num_fields == 1 ? 1.0 : f / double(options.num_fields - 1);
    vocabularies.push_back(std::max<int64_t>(
        1, std::llround(smallest * std::pow(largest / smallest, t))));
  }
  return vocabularies;
}

PlantedCtrModel SynthCtrPlantedModel(const SynthCtrOptions& options,
                                     double bias) {
  return PlantedCtrModel(options.seed, options.num_dense, options.weight_scale,
                         bias);
}

absl::StatusOr<SynthCtrSummary> GenerateSynthCtr(
    const SynthCtrOptions& options) {
  RETURN_IF_ERROR(CheckSynthCtrOptions(options));
  RETURN_IF_ERROR(MakeDirectories(options.out_dir));
  RETURN_IF_ERROR(ClearDataSet(options.out_dir, options.overwrite));
  const int threads =
      options.threads > 0
          ? options.threads
          : std::clamp<int>(std::thread::hardware_concurrency(), 1, 64);

  SynthCtrSummary summary;
  const std::string suffix = options.gzip ? ".txt.gz" : ".txt";
  summary.train_path = absl::StrCat(options.out_dir, "/train", suffix);
  summary.test_path = absl::StrCat(options.out_dir, "/test", suffix);
  summary.planted_path = absl::StrCat(options.out_dir, "/planted.json");

  const SynthCtrSource source(options);
  summary.field_vocabularies = source.vocabularies();
  summary.bias = FitBias(source, options);
  const PlantedCtrModel model = SynthCtrPlantedModel(options, summary.bias);

  ValueBitmap seen(source.total_values());
  const std::string train_partial = summary.train_path + ".partial";
  const std::string test_partial = summary.test_path + ".partial";
  absl::StatusOr<SplitResult> train =
      WriteSplit(source, model, options, threads, kTrain, options.num_train,
                 train_partial, &seen, false);
  absl::StatusOr<SplitResult> test =
      train.ok() ? WriteSplit(source, model, options, threads, kTest,
                              options.num_test, test_partial, nullptr, true)
                 : train.status();
  if (!test.ok()) {
    // Best effort: the next run removes them too.
    RemoveRecursively(train_partial).IgnoreError();
    RemoveRecursively(test_partial).IgnoreError();
    return test.status();
  }
  RETURN_IF_ERROR(RenamePath(train_partial, summary.train_path));
  RETURN_IF_ERROR(RenamePath(test_partial, summary.test_path));
  RETURN_IF_ERROR(SyncDirectory(options.out_dir));

  summary.train_examples = options.num_train;
  summary.test_examples = options.num_test;
  summary.distinct_train_ids = seen.Count();
  summary.train_positive_rate =
      static_cast<double>(train->positives) / options.num_train;
  summary.test_positive_rate =
      static_cast<double>(test->positives) / options.num_test;
  absl::StatusOr<double> auc = AreaUnderRoc(test->probabilities, test->labels);
  summary.planted_test_auc = auc.ok() ? *auc : std::nan("");
  summary.planted_test_log_loss = LogLoss(test->probabilities, test->labels);
  RETURN_IF_ERROR(
      WriteFileAtomically(summary.planted_path, PlantedJson(options, summary)));
  return summary;
}

std::string SynthCtrOptionsJson(const SynthCtrOptions& options) {
  return absl::StrCat(
      "{\"train_examples\": ", options.num_train,
      ", \"test_examples\": ", options.num_test,
      ", \"dense\": ", options.num_dense, ", \"fields\": ", options.num_fields,
      ", \"vocabulary\": ", options.vocabulary,
      ", \"zipf\": ", JsonNumber(options.zipf),
      ", \"missing\": ", JsonNumber(options.missing),
      ", \"weight_scale\": ", JsonNumber(options.weight_scale),
      ", \"positive_rate\": ", JsonNumber(options.positive_rate),
      ", \"seed\": ", options.seed,
      ", \"gzip\": ", options.gzip ? "true" : "false", "}");
}

}  // namespace psflow
