// Parsing and validation of "host:port" network addresses as they appear in
// TF_CONFIG: DNS names ("j-ps-0.ns.svc:2222"), IPv4 ("10.0.0.2:2222") and
// bracketed IPv6 ("[::1]:2222").
#ifndef PSFLOW_COMMON_HOST_PORT_H_
#define PSFLOW_COMMON_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

struct HostPort {
  std::string host;  // Without IPv6 brackets.
  int port = 0;      // 0..65535; 0 asks the OS for a free port when binding.

  // "host:port", with brackets around IPv6 hosts: the form gRPC dials.
  std::string ToString() const;
};

// Parses `address`. Port 0 is accepted here; whether it is allowed depends
// on the caller. On failure returns InvalidArgument whose message describes
// the problem and the fix without naming the field (callers prefix that).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

}  // namespace psflow

#endif  // PSFLOW_COMMON_HOST_PORT_H_
