#include "common/metrics/metrics_http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"

namespace psflow {
namespace {

constexpr size_t kMaxRequestHead = 8 * 1024;

// Milliseconds left until `deadline` for poll(), at least 0.
int MillisUntil(absl::Time deadline) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 60'000));
}

// Waits until `fd` is ready for `events` or `deadline`.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisUntil(deadline));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

void SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return;
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Response(absl::string_view status, absl::string_view type,
                     absl::string_view body, bool head_only,
                     absl::string_view extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(), "\r\n",
                      extra_headers, "Connection: close\r\n\r\n",
                      head_only ? "" : body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const Options& options, std::function<std::string()> render) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", options.port, " is outside 0..65535"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(options.port);
  if (int rc = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host \"", options.host,
                     "\" does not resolve: ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", options.host, ":", options.port, " (",
        error, "); pick another --metrics_port, or -1 to turn it off"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int actual =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, wake, actual, options, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_fd, int port,
                                     Options options,
                                     std::function<std::string()> render)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      options_(std::move(options)),
      render_(std::move(render)),
      thread_([this] { Serve(); }) {}

MetricsHttpServer::~MetricsHttpServer() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void MetricsHttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    HandleConnection(fd);
    shutdown(fd, SHUT_WR);  // The client reads the whole answer, then EOF.
    close(fd);
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  const absl::Time deadline = absl::Now() + options_.io_timeout;
  std::string head;
  char buffer[2048];
  while (!absl::StrContains(head, "\r\n\r\n") &&
         !absl::StrContains(head, "\n\n")) {
    if (head.size() > kMaxRequestHead) {
      SendAll(fd,
              Response("431 Request Header Fields Too Large", "text/plain",
                       "request head over 8 KiB\n", false),
              deadline);
      return;
    }
    if (!WaitFor(fd, POLLIN, deadline)) return;  // Too slow: drop it.
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    head.append(buffer, static_cast<size_t>(n));
  }
  const absl::string_view line =
      absl::string_view(head).substr(0, head.find_first_of("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    SendAll(fd,
            Response("400 Bad Request", "text/plain",
                     "expected \"GET /metrics HTTP/1.1\"\n", false),
            deadline);
    return;
  }
  const bool head_only = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head_only) {
    SendAll(fd,
            Response("405 Method Not Allowed", "text/plain",
                     "only GET and HEAD\n", false, "Allow: GET, HEAD\r\n"),
            deadline);
    return;
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path == "/metrics") {
    SendAll(
        fd,
        Response("200 OK", kPrometheusTextContentType, render_(), head_only),
        deadline);
  } else if (path == "/") {
    SendAll(fd,
            Response("200 OK", "text/plain",
                     "psflow metrics: GET /metrics (Prometheus text "
                     "format)\n",
                     head_only),
            deadline);
  } else {
    SendAll(fd,
            Response("404 Not Found", "text/plain",
                     "not found; metrics are at /metrics\n", head_only),
            deadline);
  }
}

}  // namespace psflow
