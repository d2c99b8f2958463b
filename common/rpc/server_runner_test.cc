#include "common/rpc/server_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/health_server.h"
#include "common/status_matchers.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace psflow {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// The serving status `port` reports, or the RPC's error code.
std::string Health(int port) {
  auto stub = grpc::health::v1::Health::NewStub(
      OpenChannel(absl::StrCat("127.0.0.1:", port), TransportSecurity()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
  if (!status.ok()) return absl::StrCat("error ", status.error_code());
  return HealthCheckResponse::ServingStatus_Name(response.status());
}

TEST(ServerRunnerTest, PortZeroPicksAPortThatServesHealth) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(Health(server->port()), "SERVING");
}

TEST(ServerRunnerTest, ABusyPortIsUnavailableNamingTheAddress) {
  ASSERT_OK_AND_ASSIGN(auto first,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  EXPECT_THAT(
      StartHealthServer(address, TransportSecurity()),
      StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr(address)));
}

TEST(ServerRunnerTest, DrainStopsServingAndIsIdempotent) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartHealthServer("127.0.0.1:0", TransportSecurity()));
  const int port = server->port();
  bool ran = false;
  server->Drain(absl::Seconds(1), [&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_NE(Health(port), "SERVING");
  server->Drain(absl::Seconds(1));  // again: nothing to do
}

// Answers every call UNIMPLEMENTED: a server to connect to.
class NothingService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
      void OnDone() override { delete this; }
    };
    return new Reactor;
  }
};

// Connects with raw TCP, speaks the HTTP/2 preface and then nothing;
// returns how long the server took to close the connection, or nullopt if
// it was still open after `wait`.
std::optional<absl::Duration> SecondsUntilClosed(int port, absl::Duration wait,
                                                 bool speak = true) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  const std::string preface =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
      std::string("\0\0\0\x04\0\0\0\0\0", 9);  // an empty SETTINGS frame
  if (speak) {
    EXPECT_EQ(write(fd, preface.data(), preface.size()),
              static_cast<ssize_t>(preface.size()));
  }
  const absl::Time start = absl::Now();
  std::optional<absl::Duration> closed;
  char buffer[4096];
  while (absl::Now() - start < wait) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {  // EOF or reset: closed
      closed = absl::Now() - start;
      break;
    }
  }
  close(fd);
  return closed;
}

std::unique_ptr<ServerRunner> StartWithIdleLimit(
    NothingService* service, absl::Duration idle,
    absl::Duration handshake = absl::Seconds(10)) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.generic_service = service;
  options.max_connection_idle = idle;
  options.handshake_timeout = handshake;
  absl::StatusOr<std::unique_ptr<ServerRunner>> runner =
      ServerRunner::Start(options);
  EXPECT_OK(runner);
  return runner.ok() ? *std::move(runner) : nullptr;
}

// A peer that connects and goes quiet does not hold its socket forever.
TEST(ServerRunnerTest, AnIdleConnectionIsClosed) {
  NothingService quick_service, patient_service;
  auto quick = StartWithIdleLimit(&quick_service, absl::Milliseconds(500));
  auto patient = StartWithIdleLimit(&patient_service, absl::Hours(1));
  ASSERT_NE(quick, nullptr);
  ASSERT_NE(patient, nullptr);
  EXPECT_TRUE(SecondsUntilClosed(quick->port(), absl::Seconds(60)).has_value());
  // The control: with an hour's limit, it is still open after 2 s.
  EXPECT_FALSE(
      SecondsUntilClosed(patient->port(), absl::Seconds(2)).has_value());
  quick->Drain(absl::Seconds(1));
  patient->Drain(absl::Seconds(1));
}

// A peer that connects and never finishes its handshake is dropped at the
// handshake deadline, long before the idle limit.
TEST(ServerRunnerTest, AHalfFinishedHandshakeIsDropped) {
  NothingService quick_service, patient_service;
  auto quick = StartWithIdleLimit(&quick_service, absl::Hours(1),
                                  absl::Milliseconds(500));
  auto patient =
      StartWithIdleLimit(&patient_service, absl::Hours(1), absl::Hours(1));
  ASSERT_NE(quick, nullptr);
  ASSERT_NE(patient, nullptr);
  EXPECT_TRUE(SecondsUntilClosed(quick->port(), absl::Seconds(60),
                                 /*speak=*/false)
                  .has_value());
  EXPECT_FALSE(SecondsUntilClosed(patient->port(), absl::Seconds(2),
                                  /*speak=*/false)
                   .has_value());
  quick->Drain(absl::Seconds(1));
  patient->Drain(absl::Seconds(1));
}

// A raw TCP connection to `port` from `source` (any 127.x.y.z), saying
// nothing; -1 when it cannot connect.
int ConnectFrom(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server has closed `fd` (EOF or reset), without waiting.
bool ClosedByServer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

// 200 connections stalled before their handshake (and kept: the deadline
// is an hour) do not stop another client from being served.
TEST(ServerRunnerTest, HeldHandshakesDoNotStopAnotherClient) {
  NothingService service;
  auto server = StartWithIdleLimit(&service, absl::Hours(1), absl::Hours(1));
  ASSERT_NE(server, nullptr);
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectFrom("127.0.0.3", server->port());
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  // Health() gives the call a 10 s deadline: the bound.
  EXPECT_EQ(Health(server->port()), "SERVING");
  for (int fd : held) close(fd);
  server->Drain(absl::Seconds(1));
}

// A peer holding more connections than its cap loses the newest; others
// are served.
TEST(ServerRunnerTest, APeerBeyondItsConnectionCapIsCut) {
  NothingService service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.generic_service = &service;
  options.handshake_timeout = absl::Hours(1);
  options.max_connections_per_peer = 8;
  ASSERT_OK_AND_ASSIGN(auto server, ServerRunner::Start(options));
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    const int fd = ConnectFrom("127.0.0.2", server->port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  // Waits on progress: the guard looks twice a second.
  int closed = 0;
  for (int round = 0; round < 600 && closed < 12; ++round) {
    closed = 0;
    for (int fd : fds) closed += ClosedByServer(fd) ? 1 : 0;
    if (closed < 12) usleep(100 * 1000);
  }
  EXPECT_EQ(closed, 12);
  // The oldest eight are the ones kept.
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(ClosedByServer(fds[i])) << i;
  EXPECT_EQ(Health(server->port()), "SERVING");
  for (int fd : fds) close(fd);
  server->Drain(absl::Seconds(1));
}

}  // namespace
}  // namespace psflow
