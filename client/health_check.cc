#include "client/health_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "proto/health.grpc.pb.h"

namespace psflow {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

absl::Status CheckHealth(const std::string& address, absl::Time deadline,
                         const TransportSecurity& security) {
  // The health service answers whoever may connect: no job token goes
  // with a probe, so a probed task (a worker, perhaps compromised) never
  // receives the prober's (psctl's admin token).
  TransportSecurity probe = security;
  probe.tokens.own.clear();
  auto channel = OpenChannel(address, probe);
  auto stub = Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, "health check");
  if (response.status() != HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(
        "health check: ",
        HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return absl::OkStatus();
}

absl::Status WaitUntilHealthy(const std::string& address,
                              const std::string& what, absl::Time deadline,
                              const TransportSecurity& security,
                              absl::Duration interval) {
  absl::Status last;
  while (true) {
    const absl::Time now = absl::Now();
    // Each probe gets a bounded slice of the remaining time.
    last = CheckHealth(
        address, std::min(deadline, now + std::max(interval, absl::Seconds(1))),
        security);
    if (last.ok()) return last;
    if (absl::Now() + interval >= deadline) break;
    RealClock().SleepFor(interval);
  }
  // A connection TLS refuses looks like a server that never answers.
  const bool silent = last.code() == absl::StatusCode::kDeadlineExceeded ||
                      last.code() == absl::StatusCode::kUnavailable;
  return absl::Status(
      last.code(),
      absl::StrCat(what, " is not healthy: ", last.message(),
                   silent ? " (is it running at that address, and with the "
                            "same transport security as this task: both "
                            "with --tls_dir of one job, or both without?)"
                          : ""));
}

}  // namespace psflow
