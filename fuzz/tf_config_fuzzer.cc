// TF_CONFIG: what every role reads from its environment.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/tf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<psflow::TfConfig> config = psflow::ParseTfConfig(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (config.ok()) {
    // What the roles derive from an accepted one must not crash either.
    (void)config->ChiefTask();
    (void)config->ChiefAddress();
    (void)config->TaskAddress();
    (void)config->IsChief();
  }
  return 0;
}
