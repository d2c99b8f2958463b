// A checkpoint's index file (what restores and psctl ckpt trust). Each
// input is tried twice: as a whole index file (framing, CRC, body), and as
// the protobuf body alone, framed correctly, so the fuzzer also reaches
// the decoding and validation behind the CRC.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/index_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<psflow::CheckpointIndex> index =
      psflow::DecodeIndexFile(bytes, "fuzz/index");
  if (index.ok()) (void)psflow::ValidateIndex(*index);

  psflow::CheckpointIndex body;
  if (body.ParseFromString(bytes)) {
    absl::StatusOr<psflow::CheckpointIndex> framed =
        psflow::DecodeIndexFile(psflow::EncodeIndexFile(body), "fuzz/index");
    if (framed.ok()) (void)psflow::ValidateIndex(*framed);
  }
  return 0;
}
