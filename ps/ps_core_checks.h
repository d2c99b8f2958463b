// Checks shared by the parameter server core's files (ps_core.cc,
// ps_core_tables.cc); not part of its interface.
#ifndef PSFLOW_PS_PS_CORE_CHECKS_H_
#define PSFLOW_PS_PS_CORE_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ps/finite_values.h"  // FirstNonFinite

namespace psflow {

// FailedPrecondition naming both versions unless `version` is this
// build's protocol version.
absl::Status CheckProtocol(uint32_t version);

}  // namespace psflow

#endif  // PSFLOW_PS_PS_CORE_CHECKS_H_
