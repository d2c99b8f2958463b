#include "common/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/metrics/prometheus_text.h"

// mg_start2 (its error text) is declared among CivetWeb's experimental
// interfaces; Debian's library exports it.
#define MG_EXPERIMENTAL_INTERFACES 1
#include <civetweb.h>

namespace psflow {
namespace {

constexpr char kIndex[] =
    "<html><head><title>psflow</title></head><body>"
    "<a href=\"/metrics\">metrics</a></body></html>\n";

// The IPv4 address `host` names, as text ("0.0.0.0", "10.0.0.5").
absl::StatusOr<std::string> Ipv4Of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host \"", host,
                     "\" is not an IPv4 address or a name of "
                     "one (",
                     rc != 0 ? gai_strerror(rc) : "no address",
                     "); the metrics endpoint serves IPv4 only"));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr,
            text, sizeof(text));
  freeaddrinfo(found);
  return std::string(text);
}

void Answer(mg_connection* connection, int status, const char* type,
            absl::string_view body, bool head_only,
            const char* allow = nullptr) {
  mg_response_header_start(connection, status);
  mg_response_header_add(connection, "Content-Type", type, -1);
  const std::string length = absl::StrCat(body.size());
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  if (allow != nullptr) mg_response_header_add(connection, "Allow", allow, -1);
  mg_response_header_add(connection, "Connection", "close", -1);
  mg_response_header_send(connection);
  if (!head_only && !body.empty()) {
    mg_write(connection, body.data(), body.size());
  }
}

// CivetWeb's own log lines (a bad request, a timeout) are its business;
// returning 1 keeps them off stderr, where they would interleave with the
// task's log.
int Quiet(const mg_connection*, const char*) { return 1; }

}  // namespace

int MetricsHttpServer::Handle(mg_connection* connection, void* self) {
  const mg_request_info* request = mg_get_request_info(connection);
  const absl::string_view method =
      request->request_method != nullptr ? request->request_method : "";
  const absl::string_view path =
      request->local_uri != nullptr ? request->local_uri : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Answer(connection, 405, "text/plain", "use GET /metrics\n", false,
           "GET, HEAD");
    return 405;
  }
  if (path == "/metrics") {
    // On CivetWeb's thread: thread_stack_floor.cc gives it a usual stack.
    const std::string body = static_cast<MetricsHttpServer*>(self)->render_();
    Answer(connection, 200, kPrometheusTextContentType, body, head);
    return 200;
  }
  if (path == "/") {
    Answer(connection, 200, "text/html; charset=utf-8", kIndex, head);
    return 200;
  }
  Answer(connection, 404, "text/plain", "not found; metrics are at /metrics\n",
         head);
  return 404;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const Options& options, std::function<std::string()> render) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", options.port, " is outside 0..65535"));
  }
  if (options.threads < 1 || options.threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics threads ", options.threads, " is outside 1..256"));
  }
  absl::StatusOr<std::string> address = Ipv4Of(options.host);
  if (!address.ok()) return address.status();
  static std::once_flag initialized;
  std::call_once(initialized, [] { mg_init_library(0); });

  auto server = std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(render)));
  const std::string ports = absl::StrCat(*address, ":", options.port);
  const std::string threads = absl::StrCat(options.threads);
  const std::string timeout =
      absl::StrCat(absl::ToInt64Milliseconds(options.io_timeout));
  const char* configuration[] = {
      "listening_ports", ports.c_str(), "num_threads", threads.c_str(),
      "request_timeout_ms", timeout.c_str(), "enable_keep_alive", "no",
      "max_request_size", "16384",
      // Connections accepted while every thread is busy wait here; beyond
      // it the acceptor waits, and the kernel's backlog holds the rest.
      "connection_queue", "64", "listen_backlog", "128",
      // No files are served: every request goes to Handle.
      "enable_directory_listing", "no", "decode_url", "no", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = Quiet;
  mg_init_data init;
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = configuration;
  char error_text[256] = {};
  unsigned error_code = 0;
  mg_error_data error;
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", options.host, ":", options.port, " (",
        error_text[0] != '\0' ? error_text : "the HTTP server did not start",
        "); pick another --metrics_port, or -1 to turn it off"));
  }
  mg_set_request_handler(server->context_, "/", &MetricsHttpServer::Handle,
                         server.get());
  mg_server_port bound[4];
  const int count = mg_get_server_ports(server->context_, 4, bound);
  if (count < 1 || bound[0].port <= 0) {
    return absl::InternalError(absl::StrCat("the metrics server on ", ports,
                                            " reports no listening port"));
  }
  server->port_ = bound[0].port;
  server->address_ = *address;
  return server;
}

namespace {

// Opens and closes a connection to `address`:`port`, ignoring failure.
void Poke(const std::string& address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address == "0.0.0.0" ? "127.0.0.1" : address.c_str(),
            &peer.sin_addr);
  connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer));
  close(fd);
}

}  // namespace

MetricsHttpServer::~MetricsHttpServer() {
  if (context_ == nullptr) return;
  // CivetWeb's acceptor notices the stop between polls of its listening
  // socket, up to 2 s apart; connections wake it, so a task exits at once.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      Poke(address_, port_);
      RealClock().SleepFor(absl::Milliseconds(20));
    }
  });
  mg_stop(context_);
  stopped = true;
  waker.join();
}

}  // namespace psflow
