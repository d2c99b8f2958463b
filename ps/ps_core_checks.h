// Checks shared by the parameter server core's files (ps_core.cc,
// ps_core_tables.cc); not part of its interface.
#ifndef PSFLOW_PS_PS_CORE_CHECKS_H_
#define PSFLOW_PS_PS_CORE_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace psflow {

// The index of the first NaN/Inf in `values`, or -1.
int64_t FirstNonFinite(absl::Span<const float> values);

// FailedPrecondition naming both versions unless `version` is this
// build's protocol version.
absl::Status CheckProtocol(uint32_t version);

}  // namespace psflow

#endif  // PSFLOW_PS_PS_CORE_CHECKS_H_
