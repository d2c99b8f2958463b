// Whether anything listens at a host:port, asked of the kernel directly:
// a TCP connect, not a gRPC channel, whose last connection error can be
// minutes old (a server dialed before it started refused the first try).
#ifndef PSFLOW_COMMON_PORT_PROBE_H_
#define PSFLOW_COMMON_PORT_PROBE_H_

#include <string>

#include "absl/time/time.h"

namespace psflow {

// True only when every address `address` (host:port) resolves to refuses
// a TCP connection (ECONNREFUSED): no process listens there. False when
// one accepts, when the attempt times out after `timeout`, or when the
// name does not resolve: nothing proves the server gone.
bool ConnectionRefused(const std::string& address, absl::Duration timeout);

}  // namespace psflow

#endif  // PSFLOW_COMMON_PORT_PROBE_H_
