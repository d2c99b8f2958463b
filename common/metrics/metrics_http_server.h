// The HTTP endpoint Prometheus scrapes: GET /metrics answers the text
// exposition that `render` returns (prometheus_text.h); GET / a short index
// naming it; other paths 404, other methods 405.
//
// Served by CivetWeb (Debian's libcivetweb), a maintained embedded HTTP
// server, never by hand-written parsing: a bounded pool of
// `Options::threads` threads answers one request per connection (no
// keep-alive), a request must arrive whole within `io_timeout` and be at
// most 16 KiB, and connections beyond the pool wait in a bounded queue.
// So a client that sends half a request, or nothing, holds one thread for
// at most `io_timeout`, and fewer such clients than threads never delay a
// scrape at all.
//
// IPv4 only (Debian's CivetWeb is built without IPv6).
//
// Thread-safe; `render` runs on the pool's threads, several at once, and
// must be too.
#ifndef PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct mg_context;
struct mg_connection;

namespace psflow {

class MetricsHttpServer {
 public:
  struct Options {
    // Interface to listen on (an IPv4 literal or a host name).
    std::string host = "0.0.0.0";
    // 0 picks a free port (see port()).
    int port = 0;
    // How long a request may take to arrive, and the answer to leave.
    absl::Duration io_timeout = absl::Seconds(5);
    // Requests served at once (1 to 256).
    int threads = 32;
  };

  // Listens and starts serving. Unavailable (naming the address and the
  // flag to change) when the port cannot be bound; InvalidArgument for a
  // port out of range or a host that is not an IPv4 address.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const Options& options, std::function<std::string()> render);

  // Stops serving: waits for requests in progress (each ends within
  // io_timeout) and the pool's threads.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port it listens on.
  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(std::function<std::string()> render)
      : render_(std::move(render)) {}
  static int Handle(mg_connection* connection, void* self);

  const std::function<std::string()> render_;
  mg_context* context_ = nullptr;
  std::string address_;  // the IPv4 address it listens on
  int port_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_COMMON_METRICS_METRICS_HTTP_SERVER_H_
