// The human-readable summary `psctl tfconfig check` prints: this task's
// role, index and address, whether it runs the chief's duties, and every
// peer. Pure formatting; no I/O.
#ifndef PSFLOW_CLIENT_PSCTL_TFCONFIG_REPORT_H_
#define PSFLOW_CLIENT_PSCTL_TFCONFIG_REPORT_H_

#include <string>

#include "common/tf_config_loader.h"

namespace psflow {

std::string FormatTfConfigReport(const LoadedTfConfig& loaded);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_TFCONFIG_REPORT_H_
