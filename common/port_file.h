// Writes a server's bound port to a file atomically (temporary file, then
// rename), so a launcher polling for it never reads a partial number.
#ifndef PSFLOW_COMMON_PORT_FILE_H_
#define PSFLOW_COMMON_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace psflow {

absl::Status WritePortFile(const std::string& path, int port);

}  // namespace psflow

#endif  // PSFLOW_COMMON_PORT_FILE_H_
