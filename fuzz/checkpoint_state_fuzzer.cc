// A checkpoint directory's `checkpoint` state file (text protobuf).
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/state_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)psflow::ParseCheckpointState(text, "fuzz/checkpoint", "fuzz");
  return 0;
}
