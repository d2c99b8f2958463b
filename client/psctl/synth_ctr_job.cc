#include "client/psctl/synth_ctr_job.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "data/criteo.h"

namespace psflow {

bool SynthesizesCtrData(const JobConfig& job) {
  const DataConfig& data = job.data();
  return data.format() == DataConfig::CRITEO && data.has_synthesize() &&
         access(data.train_path().c_str(), F_OK) != 0;
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
  if (s.train_examples() > 0) o.num_train = s.train_examples();
  if (s.test_examples() > 0) o.num_test = s.test_examples();
  if (s.vocabulary() > 0) o.vocabulary = s.vocabulary();
  if (s.zipf() > 0) o.zipf = s.zipf();
  if (s.weight_scale() > 0) o.weight_scale = s.weight_scale();
  if (s.seed() != 0) o.seed = s.seed();
  const CriteoFormat format =
      CriteoFormatOf(data.num_dense(), data.num_fields());
  o.num_dense = format.num_dense;
  o.num_fields = format.num_fields;
  if (absl::Status checked = CheckSynthCtrOptions(o); !checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthesize: ", checked.message()));
  }
  return o;
}

}  // namespace psflow
