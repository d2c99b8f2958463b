#include "common/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  return fd;
}

// Sends `request` and reads the answer until the server closes.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0)
    answer.append(buffer, n);
  close(fd);
  return answer;
}

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetricsHttpServer::Options options;
    options.host = "127.0.0.1";
    options.io_timeout = absl::Milliseconds(300);
    ASSERT_OK_AND_ASSIGN(server_, MetricsHttpServer::Start(options, [this] {
                           ++renders_;
                           return std::string("psflow_up 1\n");
                         }));
  }
  std::unique_ptr<MetricsHttpServer> server_;
  std::atomic<int> renders_{0};
};

TEST_F(MetricsHttpServerTest, ServesTheExpositionAtMetrics) {
  const std::string answer =
      Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(answer, HasSubstr("Content-Length: 12\r\n"));
  EXPECT_THAT(answer, ::testing::EndsWith("\r\n\r\npsflow_up 1\n"));
  // A query string is ignored; HEAD answers without a body.
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
              ::testing::EndsWith("psflow_up 1\n"));
  EXPECT_THAT(
      Exchange(server_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n"),
      AllOf(StartsWith("HTTP/1.1 200 OK"), HasSubstr("Content-Length: 12"),
            ::testing::EndsWith("\r\n\r\n")));
  EXPECT_EQ(renders_.load(), 3);
}

TEST_F(MetricsHttpServerTest, OtherPathsMethodsAndGarbageAreRefused) {
  EXPECT_THAT(Exchange(server_->port(), "GET /nope HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 404 Not Found"));
  EXPECT_THAT(Exchange(server_->port(), "POST /metrics HTTP/1.1\r\n\r\n"),
              AllOf(StartsWith("HTTP/1.1 405"), HasSubstr("Allow: GET, HEAD")));
  // Garbage, and a head larger than the 16 KiB limit, are answered 400
  // without reading on.
  EXPECT_THAT(Exchange(server_->port(), "hello\r\n\r\n"),
              HasSubstr(" 400 Bad Request"));
  EXPECT_THAT(
      Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nX: " +
                                    std::string(20000, 'a') + "\r\n\r\n"),
      HasSubstr(" 400 Bad Request"));
  EXPECT_EQ(renders_.load(), 0);
}

TEST_F(MetricsHttpServerTest, SilentOrHalfRequestsDoNotBlockTheNextScrape) {
  const int silent = Connect(server_->port());
  const int half = Connect(server_->port());
  ASSERT_EQ(send(half, "GET /met", 8, MSG_NOSIGNAL), 8);
  // Both are dropped after io_timeout; the scrape behind them is answered.
  EXPECT_THAT(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK"));
  close(silent);
  close(half);
}

// The attack on the hand-written server this replaced: idle, half-sent
// requests held its one thread. Here they hold a thread each for at most
// io_timeout (a minute, in this test), and the scrape beside them is
// answered without waiting for any of them.
TEST(MetricsHttpServerPoolTest, HalfSentRequestsDoNotStopAScrape) {
  MetricsHttpServer::Options options;
  options.host = "127.0.0.1";
  options.io_timeout = absl::Seconds(60);
  ASSERT_OK_AND_ASSIGN(auto server, MetricsHttpServer::Start(options, [] {
                         return std::string("up 1\n");
                       }));
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(Connect(server->port()));
    if (i % 2 == 0) {
      ASSERT_EQ(send(idle.back(), "GET /metr", 9, MSG_NOSIGNAL), 9);
    }
  }
  const int scrape = Connect(server->port());
  // A receive timeout well under io_timeout: the answer must not wait for
  // the idle clients to be dropped.
  timeval wait{20, 0};
  ASSERT_EQ(setsockopt(scrape, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)),
            0);
  const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
  ASSERT_EQ(send(scrape, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(scrape, buffer, sizeof(buffer), 0)) > 0) {
    answer.append(buffer, n);
  }
  close(scrape);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(answer, ::testing::EndsWith("up 1\n"));
  for (int fd : idle) close(fd);
}

TEST(MetricsHttpServerStartTest, ABusyPortNamesTheFlag) {
  MetricsHttpServer::Options options;
  options.host = "127.0.0.1";
  ASSERT_OK_AND_ASSIGN(auto first,
                       MetricsHttpServer::Start(options, [] { return ""; }));
  options.port = first->port();
  EXPECT_THAT(MetricsHttpServer::Start(options, [] { return ""; }),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("pick another --metrics_port")));
  options.port = 70000;
  EXPECT_THAT(MetricsHttpServer::Start(options, [] { return ""; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace psflow
