#include "bench/bench_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "client/grpc_ps_shard.h"
#include "client/psctl/job_certificates.h"

namespace psflow::bench {

std::string PsServerPath(const std::string& flag_value, const char* argv0) {
  if (!flag_value.empty()) return flag_value;
  for (std::string candidate :
       {std::string("ps/ps_server"),
        absl::StrCat(argv0, ".runfiles/psflow/ps/ps_server")}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "ps/ps_server";
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      return std::string(
          absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
  }
  return "unknown CPU";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(
    const std::string& binary, int num_ps, const std::string& dir,
    const Options& options) {
  static int generation = 0;
  ++generation;
  auto cluster = std::make_unique<Cluster>();
  cluster->options_ = options;
  std::vector<std::string> tls_flag;
  if (options.tls) {
    ClusterSpec::Job servers;
    for (int i = 0; i < num_ps; ++i) servers[i] = "127.0.0.1:1";
    // The bench's client configures the servers and creates variables, which
    // servers accept over TLS only from the chief's certificate.
    absl::StatusOr<JobCertificates> certificates = MakeJobCertificates(
        ClusterSpec({{TaskType::kChief, {{0, "127.0.0.1:1"}}},
                     {TaskType::kPs, servers}}),
        "bench", absl::Hours(24));
    if (!certificates.ok()) return certificates.status();
    const std::string tls_dir = absl::StrCat(dir, "/tls-", generation);
    absl::Status written =
        WriteJobCertificates(*certificates, tls_dir, SecretOptions{"bench"});
    if (!written.ok()) return written;
    absl::StatusOr<TransportSecurity> client =
        LoadMutualTls(tls_dir + "/ca.crt", tls_dir + "/chief-0.crt",
                      tls_dir + "/chief-0.key");
    if (!client.ok()) return client.status();
    cluster->client_security_ = *std::move(client);
    tls_flag.push_back("--tls_dir=" + tls_dir);
  } else {
    // Plaintext on loopback: the servers must be told it is meant.
    tls_flag.push_back("--allow_unauthenticated_callers");
  }
  if (!options.checkpoint_root.empty()) {
    tls_flag.push_back("--checkpoint_root=" + options.checkpoint_root);
  }
  for (int i = 0; i < num_ps; ++i) {
    std::vector<std::string> ps;
    for (int j = 0; j < num_ps; ++j) {
      ps.push_back(j == i ? "\"127.0.0.1:0\""
                          : absl::StrCat("\"127.0.0.1:", 40000 + j, "\""));
    }
    const std::string tf_config = absl::StrCat(
        R"({"cluster": {"ps": [)", absl::StrJoin(ps, ", "),
        R"(], "worker": ["127.0.0.1:39999"]}, "task": {"type": "ps", "index": )",
        i, "}}");
    // Unique per start: a stale file from a previous cluster would name a
    // dead port.
    const std::string port_file =
        absl::StrCat(dir, "/ps-", i, "-", generation, ".port");
    std::vector<std::string> argv = {
        binary, "--bind_host=127.0.0.1", "--port_file=" + port_file,
        absl::StrCat("--chunk_bytes=", options.chunk_bytes)};
    argv.insert(argv.end(), tls_flag.begin(), tls_flag.end());
    argv.insert(argv.end(), options.server_flags.begin(),
                options.server_flags.end());
    auto process = std::make_unique<Subprocess>(
        argv, std::map<std::string, std::string>{{"TF_CONFIG", tf_config}},
        absl::StrCat(dir, "/ps-", i, "-", generation, ".log"));
    absl::Status started = process->Start();
    if (!started.ok()) return started;
    // Up to 30 s, but no longer than the server lives.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::StatusOr<int> port =
        WaitForPortFile(port_file, absl::Milliseconds(100));
    while (!port.ok() && !process->Exited() && absl::Now() < deadline) {
      port = WaitForPortFile(port_file, absl::Milliseconds(100));
    }
    if (!port.ok()) {
      absl::StatusOr<int> exit = process->Wait(absl::ZeroDuration());
      const std::string why =
          exit.ok() ? absl::StrCat("it exited with code ", *exit,
                                   *exit == 127 ? " (it could not be run)" : "",
                                   " before writing its port")
                    : absl::StrCat("no port within 30 s (",
                                   port.status().message(), ")");
      return absl::UnavailableError(
          absl::StrCat("ps_server (", binary, ") did not start: ", why,
                       "; its output: ", process->Output()));
    }
    cluster->ports_.push_back(*port);
    cluster->processes_.push_back(std::move(process));
  }
  return cluster;
}

std::unique_ptr<ParameterClient> Cluster::NewClient(
    const Placement& placement) const {
  std::vector<std::unique_ptr<PsShard>> shards;
  GrpcPsShard::Options options;
  options.connections = options_.connections;
  options.security = client_security_;
  for (size_t i = 0; i < ports_.size(); ++i) {
    shards.push_back(ConnectPsShard(absl::StrCat("127.0.0.1:", ports_[i]),
                                    absl::StrCat("ps-", i), options,
                                    options_.shared_memory_bytes));
  }
  return std::make_unique<ParameterClient>(std::move(shards), placement,
                                           ParameterClient::Options());
}

absl::StatusOr<double> Cluster::ServersCpuSeconds() const {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double seconds = 0;
  for (const auto& process : processes_) {
    const std::string path = absl::StrCat("/proc/", process->pid(), "/stat");
    std::ifstream in(path);
    std::string stat((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    // After the command name (in parentheses, which may hold spaces):
    // state is field 3, utime and stime are fields 14 and 15.
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) {
      return absl::InternalError(absl::StrCat("cannot read ", path));
    }
    std::vector<std::string> fields =
        absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
    int64_t utime = 0, stime = 0;
    if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
        !absl::SimpleAtoi(fields[12], &stime)) {
      return absl::InternalError(absl::StrCat("cannot parse ", path));
    }
    seconds += static_cast<double>(utime + stime) / tick;
  }
  return seconds;
}

Cluster::~Cluster() {
  for (auto& p : processes_) p->Signal(SIGTERM);
  for (auto& p : processes_) (void)p->Wait(absl::Seconds(10));
}

}  // namespace psflow::bench
