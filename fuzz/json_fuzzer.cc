// common/json: the strict JSON parser under TF_CONFIG.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)psflow::ParseJson(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
