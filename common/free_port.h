// Free TCP ports on 127.0.0.1 for servers a launcher is about to start.
//
// A port is released before these return, so only a bind can make it
// fail later. They are chosen outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port from inside it can be handed, in
// the moment between the pick and the server's bind, to any outgoing
// connection on the host, which CI met with many jobs starting at once
// ("cannot listen on ...: the port is in use"). Outside it only another
// explicit bind can take the port. Where that range leaves too little room
// (a host that made nearly every port ephemeral) the kernel chooses, from
// inside it, as before.
#ifndef PSFLOW_COMMON_FREE_PORT_H_
#define PSFLOW_COMMON_FREE_PORT_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

absl::StatusOr<int> PickFreePort();

// `count` distinct free ports (all held while they are chosen, so no two
// are the same), for a launcher that starts that many servers at once.
absl::StatusOr<std::vector<int>> PickFreePorts(int count);

// The ports PickFreePorts draws from, given the ephemeral range [low, high]:
// [10000, 65535] less that range (below 10000 live well-known services);
// empty when fewer than 1024 are left. Inclusive ranges.
std::vector<std::pair<int, int>> ServerPortRanges(int ephemeral_low,
                                                  int ephemeral_high);

// The kernel's ephemeral range, from /proc/sys/net/ipv4/ip_local_port_range
// (Linux's default, 32768-60999, when it cannot be read).
std::pair<int, int> EphemeralPortRange();

}  // namespace psflow

#endif  // PSFLOW_COMMON_FREE_PORT_H_
