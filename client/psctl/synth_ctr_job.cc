#include "client/psctl/synth_ctr_job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "data/criteo.h"

namespace psflow {

bool SynthesizesCtrData(const JobConfig& job) {
  const DataConfig& data = job.data();
  // Missing means no entry at all: a link whose target is gone (a share
  // not mounted yet) is the user's data, read (and refused) as such.
  struct stat st;
  return data.format() == DataConfig::CRITEO && data.has_synthesize() &&
         lstat(data.train_path().c_str(), &st) != 0 && errno == ENOENT;
}

absl::Status CheckSynthesizedDataMatches(const JobConfig& job) {
  const DataConfig& data = job.data();
  if (data.format() != DataConfig::CRITEO || !data.has_synthesize() ||
      SynthesizesCtrData(job)) {
    return absl::OkStatus();
  }
  const std::string planted = DirName(data.train_path()) + "/planted.json";
  if (!PathExists(planted)) return absl::OkStatus();  // the user's own data
  ASSIGN_OR_RETURN(const SynthCtrOptions options, SynthCtrOptionsOf(job));
  absl::StatusOr<std::string> text = ReadFileToString(planted, 1 << 20);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("cannot read ", planted, ": ", text.status().message()));
  }
  const std::string wanted = SynthCtrOptionsJson(options);
  if (text->find(wanted) == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        DirName(data.train_path()),
        " holds a synthetic data set made with other settings than "
        "data.synthesize asks for (",
        planted, " records them; the config asks for ", wanted,
        "); the job would train on the old set. Remove that folder to have "
        "it generated again, or point data.train_path and data.test_path at "
        "another folder"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SynthCtrOptions> SynthCtrOptionsOf(const JobConfig& job) {
  const DataConfig& data = job.data();
  const std::string dir = DirName(data.train_path());
  if (data.train_path() != dir + "/train.txt" ||
      data.test_path() != dir + "/test.txt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.synthesize writes <dir>/train.txt and <dir>/test.txt, so "
        "data.train_path and data.test_path must be such a pair (they are \"",
        data.train_path(), "\" and \"", data.test_path(), "\")"));
  }
  const SyntheticCtrConfig& s = data.synthesize();
  SynthCtrOptions o;
  o.out_dir = dir;
  // 0 keeps the generator's default; a negative (or NaN) value is a
  // mistake, refused rather than read as 0. The upper bounds are the
  // generator's (CheckSynthCtrOptions below).
  auto set = [](const char* field, auto value, auto& option) {
    if (value == 0) return absl::OkStatus();
    if (!(value > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.synthesize.", field, " is ", value,
          "; use a positive number, or 0 (or leave it out) for the "
          "default ",
          option));
    }
    option = value;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(set("train_examples", s.train_examples(), o.num_train));
  RETURN_IF_ERROR(set("test_examples", s.test_examples(), o.num_test));
  RETURN_IF_ERROR(set("vocabulary", s.vocabulary(), o.vocabulary));
  RETURN_IF_ERROR(set("zipf", s.zipf(), o.zipf));
  RETURN_IF_ERROR(set("weight_scale", s.weight_scale(), o.weight_scale));
  if (s.seed() != 0) o.seed = s.seed();
  const CriteoFormat format = CriteoFormatOf(data);
  o.num_dense = format.num_dense;
  o.num_fields = format.num_fields;
  if (absl::Status checked = CheckSynthCtrOptions(o); !checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthesize: ", checked.message()));
  }
  return o;
}

}  // namespace psflow
