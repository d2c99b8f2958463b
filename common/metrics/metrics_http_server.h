// The HTTP endpoint Prometheus scrapes: GET /metrics answers the text
// exposition that `render` returns (prometheus_text.h); GET / a short index
// naming it; other paths 404, other methods 405.
//
// Deliberately small: HTTP/1.1 without keep-alive, one connection at a
// time (a scrape every few seconds is the whole load). Untrusted input is
// bounded: a request head must fit in 8 KiB and arrive, like the answer
// must leave, within `io_timeout`, so a client that sends half a request
// or nothing holds the server for at most that long.
//
// Thread-safe; `render` runs on the server's thread and must be too.
#ifndef PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psflow {

class MetricsHttpServer {
 public:
  struct Options {
    // Interface to listen on (an IPv4 or IPv6 literal or a host name).
    std::string host = "0.0.0.0";
    // 0 picks a free port (see port()).
    int port = 0;
    absl::Duration io_timeout = absl::Seconds(5);
  };

  // Listens and starts serving. Unavailable (naming the address and the
  // flag to change) when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const Options& options, std::function<std::string()> render);

  // Stops serving and joins the thread (an in-flight request ends at its
  // io_timeout at the latest).
  ~MetricsHttpServer();

  // The port it listens on.
  int port() const { return port_; }

 private:
  MetricsHttpServer(int listen_fd, int wake_fd, int port, Options options,
                    std::function<std::string()> render);
  void Serve();
  void HandleConnection(int fd);

  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written to stop Serve()
  const int port_;
  const Options options_;
  const std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_
