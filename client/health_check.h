// Probes a psflow process's grpc.health.v1 service: how the chief waits
// for its peers and how operators check a task by hand.
#ifndef PSFLOW_CLIENT_HEALTH_CHECK_H_
#define PSFLOW_CLIENT_HEALTH_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/rpc/transport_security.h"

namespace psflow {

// One probe of `address` (host:port). OK when it reports SERVING;
// Unavailable when it cannot be reached or is not serving (draining);
// DeadlineExceeded when it does not answer in time.
absl::Status CheckHealth(const std::string& address, absl::Time deadline,
                         const TransportSecurity& security);

// Probes every `interval` until SERVING or `deadline`; returns the last
// probe's error, naming `what` (e.g. "ps-1 at 10.0.0.3:2222").
absl::Status WaitUntilHealthy(
    const std::string& address, const std::string& what, absl::Time deadline,
    const TransportSecurity& security,
    absl::Duration interval = absl::Milliseconds(200));

}  // namespace psflow

#endif  // PSFLOW_CLIENT_HEALTH_CHECK_H_
