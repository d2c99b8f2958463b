#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
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
  // num_threads 20, starttime 22 (ticks after boot), vsize 23 (bytes),
  // rss 24 (pages).
  auto field = [&fields](int number, int64_t& value) {
    const size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() && absl::SimpleAtoi(fields[index], &value);
  };
  int64_t utime, stime, threads, rss, start_ticks, vsize;
  if (field(14, utime) && field(15, stime)) {
    sample.cpu_seconds =
        static_cast<double>(utime + stime) / clock_ticks_per_second;
  }
  if (field(20, threads)) sample.threads = threads;
  if (field(24, rss)) sample.resident_bytes = rss * page_bytes;
  if (field(23, vsize)) sample.virtual_bytes = vsize;
  if (field(22, start_ticks)) {
    sample.started_after_boot_seconds =
        static_cast<double>(start_ticks) / clock_ticks_per_second;
  }
}

std::optional<int64_t> ParseBootTime(absl::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    int64_t btime;
    if (absl::ConsumePrefix(&line, "btime ") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &btime)) {
      return btime;
    }
  }
  return std::nullopt;
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
  if (sample.started_after_boot_seconds.has_value()) {
    if (std::optional<int64_t> boot =
            ParseBootTime(ReadProcFile("/proc/stat"))) {
      sample.start_time_seconds =
          static_cast<double>(*boot) + *sample.started_after_boot_seconds;
    }
  }
  std::error_code error;
  int64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end;
       !error && it != end; it.increment(error)) {
    ++fds;
  }
  if (!error) sample.open_fds = fds - 1;  // less the iterator's own
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    sample.max_fds = static_cast<int64_t>(limit.rlim_cur);
  }
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
  ASSIGN_OR_RETURN(GaugeCell * virtual_memory,
                   r.UnlabeledGauge("process_virtual_memory_bytes",
                                    "Virtual memory size of this process."));
  ASSIGN_OR_RETURN(
      GaugeCell * start_time,
      r.UnlabeledGauge("process_start_time_seconds",
                       "Start time of this process since the Unix epoch."));
  ASSIGN_OR_RETURN(GaugeCell * open_fds,
                   r.UnlabeledGauge("process_open_fds",
                                    "File descriptors this process has open."));
  ASSIGN_OR_RETURN(
      GaugeCell * max_fds,
      r.UnlabeledGauge("process_max_fds",
                       "The most file descriptors this process may open."));
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
    if (sample.virtual_bytes) {
      virtual_memory->Set(static_cast<double>(*sample.virtual_bytes));
    }
    if (sample.start_time_seconds) start_time->Set(*sample.start_time_seconds);
    if (sample.open_fds) open_fds->Set(static_cast<double>(*sample.open_fds));
    if (sample.max_fds) max_fds->Set(static_cast<double>(*sample.max_fds));
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
