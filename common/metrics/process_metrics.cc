#include "common/metrics/process_metrics.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace psflow {
namespace {

std::string ReadProcFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void ParseProcStat(absl::string_view text, int64_t clock_ticks_per_second,
                   int64_t page_bytes, ProcessSample& sample) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // the fields start after the last ')'.
  const size_t close = text.rfind(')');
  if (close == absl::string_view::npos || clock_ticks_per_second <= 0) return;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state): utime is field 14, stime 15,
  // num_threads 20, rss 24 (pages).
  auto field = [&fields](int number, int64_t& value) {
    const size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() && absl::SimpleAtoi(fields[index], &value);
  };
  int64_t utime, stime, threads, rss;
  if (field(14, utime) && field(15, stime)) {
    sample.cpu_seconds =
        static_cast<double>(utime + stime) / clock_ticks_per_second;
  }
  if (field(20, threads)) sample.threads = threads;
  if (field(24, rss)) sample.resident_bytes = rss * page_bytes;
}

void ParseProcIo(absl::string_view text, ProcessSample& sample) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    int64_t value;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &value)) {
      continue;
    }
    if (kv.first == "read_bytes") sample.disk_read_bytes = value;
    if (kv.first == "write_bytes") sample.disk_written_bytes = value;
  }
}

void ParseProcNetDev(absl::string_view text, ProcessSample& sample) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;  // the two header lines
    const std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipEmpty());
    int64_t received, transmitted;
    // Receive: bytes packets errs drop fifo frame compressed multicast;
    // then transmit bytes.
    if (name.empty() || fields.size() < 9 ||
        !absl::SimpleAtoi(fields[0], &received) ||
        !absl::SimpleAtoi(fields[8], &transmitted)) {
      continue;
    }
    sample.network[name] = {received, transmitted};
  }
}

ProcessSample SampleProcess() {
  ProcessSample sample;
  ParseProcStat(ReadProcFile("/proc/self/stat"), sysconf(_SC_CLK_TCK),
                sysconf(_SC_PAGESIZE), sample);
  ParseProcIo(ReadProcFile("/proc/self/io"), sample);
  ParseProcNetDev(ReadProcFile("/proc/self/net/dev"), sample);
  return sample;
}

std::optional<int64_t> ResidentMemoryBytes() {
  ProcessSample sample;
  ParseProcStat(ReadProcFile("/proc/self/stat"), sysconf(_SC_CLK_TCK),
                sysconf(_SC_PAGESIZE), sample);
  return sample.resident_bytes;
}

absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
ExportProcessMetrics(MetricsRegistry* registry) {
  MetricsRegistry& r = *registry;
  ASSIGN_OR_RETURN(
      CounterCell * cpu,
      r.UnlabeledCounter("process_cpu_seconds_total",
                         "User and system CPU time of this process."));
  ASSIGN_OR_RETURN(GaugeCell * resident,
                   r.UnlabeledGauge("process_resident_memory_bytes",
                                    "Resident set size of this process."));
  ASSIGN_OR_RETURN(
      GaugeCell * threads,
      r.UnlabeledGauge("psflow_process_threads", "Threads of this process."));
  ASSIGN_OR_RETURN(CounterCell * disk_read,
                   r.UnlabeledCounter("psflow_process_disk_read_bytes_total",
                                      "Bytes this process read from storage."));
  ASSIGN_OR_RETURN(CounterCell * disk_written,
                   r.UnlabeledCounter("psflow_process_disk_written_bytes_total",
                                      "Bytes this process wrote to storage."));
  ASSIGN_OR_RETURN(
      CounterFamily * received,
      r.Counter("psflow_process_network_receive_bytes_total",
                "Bytes received on each interface of this process's network "
                "namespace (all its processes together).",
                {"interface"}));
  ASSIGN_OR_RETURN(
      CounterFamily * transmitted,
      r.Counter("psflow_process_network_transmit_bytes_total",
                "Bytes sent on each interface of this process's network "
                "namespace (all its processes together).",
                {"interface"}));
  return registry->AddRefresher([=] {
    const ProcessSample sample = SampleProcess();
    if (sample.cpu_seconds) cpu->IncreaseTo(*sample.cpu_seconds);
    if (sample.resident_bytes) {
      resident->Set(static_cast<double>(*sample.resident_bytes));
    }
    if (sample.threads) threads->Set(static_cast<double>(*sample.threads));
    if (sample.disk_read_bytes) disk_read->IncreaseTo(*sample.disk_read_bytes);
    if (sample.disk_written_bytes) {
      disk_written->IncreaseTo(*sample.disk_written_bytes);
    }
    for (const auto& [name, bytes] : sample.network) {
      if (absl::StatusOr<CounterCell*> in = received->WithLabels({name});
          in.ok()) {
        (*in)->IncreaseTo(bytes.first);
      }
      if (absl::StatusOr<CounterCell*> out = transmitted->WithLabels({name});
          out.ok()) {
        (*out)->IncreaseTo(bytes.second);
      }
    }
  });
}

}  // namespace psflow
