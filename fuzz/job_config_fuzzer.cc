// The job config (JSON into protobuf, then validation).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/job/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<psflow::JobConfig> config = psflow::ParseJobConfig(
      absl::string_view(reinterpret_cast<const char*>(data), size),
      "fuzz.json");
  if (config.ok()) {
    // Epochs become steps: overflow-checked arithmetic on accepted values.
    (void)psflow::TotalGlobalSteps(*config, 60000, 3);
    (void)psflow::ReplicasToAggregate(*config, 3);
  }
  return 0;
}
