// What psflow's benchmarks share: real ps_server processes on free ports of
// 127.0.0.1, finding the ps_server binary, and small reporting helpers.
// Not thread-safe; a benchmark's main thread drives it.
#ifndef PSFLOW_BENCH_BENCH_CLUSTER_H_
#define PSFLOW_BENCH_BENCH_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "common/rpc/transport_security.h"
#include "common/subprocess.h"

namespace psflow::bench {

// `flag_value` when it is set; else ps_server beside the working directory
// (`bazel run`) or in `argv0`'s runfiles (`bazel-bin/bench/...`).
std::string PsServerPath(const std::string& flag_value, const char* argv0);

// The first "model name" of /proc/cpuinfo.
std::string CpuModel();

// The middle element (the upper one of an even count); `v` is not empty.
double Median(std::vector<double> v);

// Real ps_server processes on free ports; stopped (SIGTERM) on destruction.
class Cluster {
 public:
  struct Options {
    // ps_server --chunk_bytes.
    int64_t chunk_bytes = 4 << 20;
    // TCP connections per client per server.
    int connections = 2;
    // Shared memory per server (ConnectPsShard); 0 measures TCP alone.
    int64_t shared_memory_bytes = 0;
    // Mutual TLS: certificates made for the cluster, every server started
    // with --tls_dir, every client presenting its own.
    bool tls = false;
    // ps_server --checkpoint_root (default: the bench's working directory).
    std::string checkpoint_root;
    // More ps_server flags (e.g. "--apply_threads=1").
    std::vector<std::string> server_flags;
  };

  // Starts `num_ps` servers of `binary`; their port files and logs go to
  // `dir`. Unavailable (with the server's output) when one does not start.
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(
      const std::string& binary, int num_ps, const std::string& dir,
      const Options& options);

  // A client of its own (own connections), as a separate worker would be.
  std::unique_ptr<ParameterClient> NewClient(const Placement& placement) const;

  int num_ps() const { return static_cast<int>(ports_.size()); }

  // CPU time (user + system) the servers have used so far, all of them
  // together, from /proc/<pid>/stat: exact to a clock tick (10 ms), so
  // measure spans of seconds.
  absl::StatusOr<double> ServersCpuSeconds() const;

  ~Cluster();

 private:
  Options options_;
  TransportSecurity client_security_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<Subprocess>> processes_;
};

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_BENCH_CLUSTER_H_
