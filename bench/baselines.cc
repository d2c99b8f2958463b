#include "bench/baselines.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psflow::bench {
namespace {

constexpr size_t kIoBytes = 4 << 20;

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<double> LoopbackTcpGBps(size_t bytes_per_stream, int streams,
                                       int repeats) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) return Errno("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listener, streams) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      close(listener);
      return Errno("bind/listen");
    }
    std::vector<int> senders(streams, -1), receivers(streams, -1);
    for (int s = 0; s < streams; ++s) {
      senders[s] = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(senders[s], reinterpret_cast<sockaddr*>(&addr),
                  sizeof(addr)) != 0) {
        return Errno("connect");
      }
      receivers[s] = accept(listener, nullptr, nullptr);
      if (receivers[s] < 0) return Errno("accept");
    }
    close(listener);
    std::vector<std::thread> threads;
    const absl::Time start = absl::Now();
    for (int s = 0; s < streams; ++s) {
      threads.emplace_back([fd = senders[s], bytes_per_stream] {
        std::vector<char> buffer(kIoBytes, 1);
        size_t left = bytes_per_stream;
        while (left > 0) {
          ssize_t n = send(fd, buffer.data(), std::min(left, kIoBytes), 0);
          if (n <= 0) return;
          left -= n;
        }
      });
      threads.emplace_back([fd = receivers[s], bytes_per_stream] {
        std::vector<char> buffer(kIoBytes);
        size_t left = bytes_per_stream;
        while (left > 0) {
          ssize_t n = recv(fd, buffer.data(), std::min(left, kIoBytes), 0);
          if (n <= 0) return;
          left -= n;
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    for (int s = 0; s < streams; ++s) {
      close(senders[s]);
      close(receivers[s]);
    }
    best = std::max(best, bytes_per_stream * streams / seconds / 1e9);
  }
  return best;
}

double TriadGBps(size_t elements, int repeats) {
  std::vector<float> a(elements, 0.0f), b(elements, 1.0f), c(elements, 2.0f);
  const float s = 0.5f;
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const absl::Time start = absl::Now();
    float* __restrict__ pa = a.data();
    const float* __restrict__ pb = b.data();
    const float* __restrict__ pc = c.data();
    for (size_t i = 0; i < elements; ++i) pa[i] = pb[i] + s * pc[i];
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    best = std::max(best, 12.0 * elements / seconds / 1e9);
  }
  // Keep the result observable so the loop is not optimized away.
  if (a[elements / 2] != 2.0f) best = -1;
  return best;
}

}  // namespace psflow::bench
