#include "bench/baselines.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
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

absl::Status Errno(const char* what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Closes the descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  const int fd_;
};

}  // namespace

absl::StatusOr<LoopbackCost> LoopbackTcpRun(size_t bytes_per_stream,
                                            int streams) {
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
    if (connect(senders[s], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
        0) {
      return Errno("connect");
    }
    receivers[s] = accept(listener, nullptr, nullptr);
    if (receivers[s] < 0) return Errno("accept");
  }
  close(listener);
  std::vector<std::thread> threads;
  const double cpu_start = ProcessCpuSeconds();
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
  LoopbackCost cost;
  cost.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  cost.cpu_seconds = ProcessCpuSeconds() - cpu_start;
  for (int s = 0; s < streams; ++s) {
    close(senders[s]);
    close(receivers[s]);
  }
  cost.gbps = bytes_per_stream * streams / cost.wall_seconds / 1e9;
  return cost;
}

absl::StatusOr<double> LoopbackTcpGBps(size_t bytes_per_stream, int streams,
                                       int repeats) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    absl::StatusOr<LoopbackCost> run =
        LoopbackTcpRun(bytes_per_stream, streams);
    if (!run.ok()) return run.status();
    best = std::max(best, run->gbps);
  }
  return best;
}

absl::StatusOr<double> SequentialWriteGBps(const std::string& path,
                                           size_t bytes) {
  // Filled before the clock starts, so only the kernel's work is timed.
  std::vector<char> buffer(kIoBytes, 1);
  unlink(path.c_str());
  const absl::Time start = absl::Now();
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Errno("create", path);
  size_t left = bytes;
  while (left > 0) {
    const ssize_t n = write(fd.get(), buffer.data(), std::min(left, kIoBytes));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path);
    }
    left -= static_cast<size_t>(n);
  }
  if (fdatasync(fd.get()) != 0) return Errno("fdatasync", path);
  return bytes / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
}

absl::StatusOr<double> SequentialReadGBps(const std::string& path) {
  std::vector<char> buffer(kIoBytes);
  const absl::Time start = absl::Now();
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  size_t total = 0;
  while (true) {
    const ssize_t n = read(fd.get(), buffer.data(), kIoBytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("read", path);
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  return total / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
}

absl::Status DropFromPageCache(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  // Dirty pages cannot be dropped: write them back first.
  if (fdatasync(fd.get()) != 0) return Errno("fdatasync", path);
  const int rc = posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("posix_fadvise ", path, ": ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> PageCacheResidentFraction(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno("stat", path);
  if (st.st_size == 0) return 1.0;
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return Errno("mmap", path);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  const int rc = mincore(map, st.st_size, resident.data());
  munmap(map, st.st_size);
  if (rc != 0) return Errno("mincore", path);
  size_t in_cache = 0;
  for (unsigned char r : resident) in_cache += r & 1;
  return static_cast<double>(in_cache) / pages;
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

std::string LoadAverages() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return absl::StrCat(one, " ", five, " ", fifteen);
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace psflow::bench
