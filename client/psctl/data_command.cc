#include "client/psctl/data_command.h"

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "data/synth_ctr.h"

namespace psflow {
namespace {

class DataSynthCtrCommand : public Subcommand {
 public:
  DataSynthCtrCommand()
      : Subcommand(
            "data synth-ctr", {},
            "psctl data synth-ctr --out_dir=DIR [--train_examples=200000] "
            "[--test_examples=50000]\n"
            "            [--fields=26] [--dense=13] [--vocabulary=2000000] "
            "[--zipf=1.1] [--missing=0.05]\n"
            "            [--weight_scale=0.25] [--positive_rate=0.25] "
            "[--seed=1] [--threads=0] [--gzip] [--overwrite]",
            "Synthetic click-through-rate data in the Criteo text format:\n"
            "DIR/train.txt and DIR/test.txt (.gz with --gzip), labels drawn\n"
            "from a planted logistic model, and DIR/planted.json (written\n"
            "last) with the options and that model's held-out AUC, the\n"
            "best any model can reach (docs/data.md).") {
    FlagSet& flags = mutable_flags();
    flags.AddString("out_dir", &options_.out_dir,
                    "directory for the data set (required; created if "
                    "missing)");
    flags.AddInt("train_examples", &train_examples_, "training examples");
    flags.AddInt("test_examples", &test_examples_,
                 "held-out examples (their scores are kept in memory)");
    flags.AddInt("fields", &options_.num_fields,
                 "categorical columns (Criteo: 26)");
    flags.AddInt("dense", &options_.num_dense, "integer columns (Criteo: 13)");
    flags.AddInt("vocabulary", &vocabulary_,
                 "values of the largest field; the fields' vocabularies "
                 "spread log-uniformly from 4 up to it");
    flags.AddString("zipf", &zipf_,
                    "exponent of the values' power-law frequencies (real "
                    "logs: about 1.05 to 1.2)");
    flags.AddString("missing", &missing_,
                    "probability that a value is missing (written empty)");
    flags.AddString("weight_scale", &weight_scale_,
                    "standard deviation of the planted categorical weights "
                    "(dense: half); larger makes an easier problem");
    flags.AddString("positive_rate", &positive_rate_,
                    "fraction of positive labels the planted bias aims at");
    flags.AddInt("seed", &seed_, "the same seed writes the same bytes");
    flags.AddInt("threads", &options_.threads,
                 "generator threads (0: one per core); the output does not "
                 "depend on it");
    flags.AddBool("gzip", &options_.gzip, "write train.txt.gz and test.txt.gz");
    flags.AddBool("overwrite", &options_.overwrite,
                  "replace a data set already in --out_dir");
  }

  int Run(const std::vector<std::string>&, std::ostream& out,
          std::ostream& err) override {
    const std::string prefix = "psctl data synth-ctr: ";
    if (options_.out_dir.empty()) {
      err << prefix << "--out_dir=DIR is required\n";
      return kExitUsage;
    }
    SynthCtrOptions options = options_;
    for (const auto& [name, text, field] :
         {std::make_tuple("zipf", &zipf_, &options.zipf),
          std::make_tuple("missing", &missing_, &options.missing),
          std::make_tuple("weight_scale", &weight_scale_,
                          &options.weight_scale),
          std::make_tuple("positive_rate", &positive_rate_,
                          &options.positive_rate)}) {
      if (!absl::SimpleAtod(*text, field) || !std::isfinite(*field)) {
        err << prefix << "--" << name << "=" << *text << " is not a number\n";
        return kExitUsage;
      }
    }
    if (seed_ < 0) {
      err << prefix << "--seed=" << seed_ << " is negative; use 0 or more\n";
      return kExitUsage;
    }
    options.seed = static_cast<uint64_t>(seed_);
    options.num_train = train_examples_;
    options.num_test = test_examples_;
    options.vocabulary = vocabulary_;
    absl::Status valid = CheckSynthCtrOptions(options);
    if (!valid.ok()) {
      err << prefix << valid.message() << "\n";
      return kExitUsage;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<SynthCtrSummary> summary = GenerateSynthCtr(options);
    if (!summary.ok()) {
      err << prefix << summary.status().message() << "\n";
      return kExitFailed;
    }
    Print(options, *summary, absl::ToDoubleSeconds(absl::Now() - start), out);
    return kExitOk;
  }

 private:
  static void Print(const SynthCtrOptions& options,
                    const SynthCtrSummary& summary, double seconds,
                    std::ostream& out) {
    out << absl::StrFormat(
        "wrote %d training examples to %s and %d held-out examples to %s "
        "in %.1f s\n",
        summary.train_examples, summary.train_path, summary.test_examples,
        summary.test_path, seconds);
    out << absl::StrFormat(
        "columns: %d integer, %d categorical (vocabularies %d to %d, zipf "
        "%g); %g%% of values missing\n",
        options.num_dense, options.num_fields,
        summary.field_vocabularies.front(), summary.field_vocabularies.back(),
        options.zipf, 100 * options.missing);
    out << "distinct ids in the training set: " << summary.distinct_train_ids
        << "\n";
    out << absl::StrFormat("positive rate: train %.4f, held-out %.4f\n",
                           summary.train_positive_rate,
                           summary.test_positive_rate);
    if (std::isnan(summary.planted_test_auc)) {
      out << "planted model AUC on the held-out set: undefined (it holds "
             "one class only; generate more examples)\n";
    } else {
      out << absl::StrFormat(
          "planted model AUC on the held-out set: %.4f (the best any model "
          "can do)\n",
          summary.planted_test_auc);
    }
    out << absl::StrFormat("planted model log loss on the held-out set: %.4f\n",
                           summary.planted_test_log_loss);
    out << "details: " << summary.planted_path << "\n";
  }

  SynthCtrOptions options_;
  // Flags without an int64 or double type: parsed in Run.
  int train_examples_ = static_cast<int>(SynthCtrOptions().num_train);
  int test_examples_ = static_cast<int>(SynthCtrOptions().num_test);
  int vocabulary_ = static_cast<int>(SynthCtrOptions().vocabulary);
  int seed_ = static_cast<int>(SynthCtrOptions().seed);
  std::string zipf_ = absl::StrCat(SynthCtrOptions().zipf);
  std::string missing_ = absl::StrCat(SynthCtrOptions().missing);
  std::string weight_scale_ = absl::StrCat(SynthCtrOptions().weight_scale);
  std::string positive_rate_ = absl::StrCat(SynthCtrOptions().positive_rate);
};

}  // namespace

std::unique_ptr<Subcommand> NewDataSynthCtrCommand() {
  return std::make_unique<DataSynthCtrCommand>();
}

}  // namespace psflow
