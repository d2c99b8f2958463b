// metrics_cost_bench: what psflow's metrics cost, piece by piece, on this
// machine, so their share of a training step can be bounded without the
// run-to-run noise of whole jobs (bench/metrics_overhead.sh measures those):
//
//   per step     a worker's metric updates each step: 3 clock reads, 3
//                histogram observations (compute, pull wait, push wait), 2
//                counter adds (WorkerMetrics, as the trainer makes them)
//   per push     a parameter server's apply-time observation (1 clock read
//                pair, 1 histogram observation) per push batch
//   per scrape   one /metrics answer of a parameter server and of a worker:
//                refresh (Stats copied in, /proc read), snapshot, render
//   per sample   one system-metrics sample into an event file (/proc read,
//                scalars written and flushed), every 5 s per process
//
//   bazel build --config=opt //bench:metrics_cost_bench
//   bazel-bin/bench/metrics_cost_bench
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/metrics/event_file_writer.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/prometheus_text.h"
#include "common/metrics/system_metrics_logger.h"
#include "ps/ps_metrics.h"
#include "ps/staleness_histogram.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(int, steps, 2'000'000, "Simulated steps for the per-step costs");
ABSL_FLAG(int, scrapes, 2000, "Scrapes rendered for the per-scrape costs");
ABSL_FLAG(int, samples, 500, "System-metrics samples written");

namespace psflow {
namespace {

template <typename Body>
double NanosPer(int n, Body body) {
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) body(i);
  return absl::ToDoubleNanoseconds(absl::Now() - start) / n;
}

void Die(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  std::exit(1);
}

int Run() {
  const int steps = absl::GetFlag(FLAGS_steps);
  const int scrapes = absl::GetFlag(FLAGS_scrapes);

  // A worker's registry, as worker --metrics_port builds it.
  MetricsRegistry worker_registry;
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> worker =
      WorkerMetrics::Create(&worker_registry);
  if (!worker.ok()) Die(worker.status());
  absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>>
      worker_proc = ExportProcessMetrics(&worker_registry);
  if (!worker_proc.ok()) Die(worker_proc.status());
  const WorkerMetrics& w = **worker;
  const double per_step = NanosPer(steps, [&](int) {
    const absl::Time t0 = absl::Now();
    const absl::Time t1 = absl::Now();
    const absl::Time t2 = absl::Now();
    w.pull_wait_seconds->Observe(absl::ToDoubleSeconds(t1 - t0));
    w.compute_seconds->Observe(absl::ToDoubleSeconds(t2 - t1));
    w.push_wait_seconds->Observe(absl::ToDoubleSeconds(t2 - t0));
    w.steps->Increment();
    w.examples->Add(64);
  });

  // A parameter server's registry, with a Stats like the default job's.
  MetricsRegistry ps_registry;
  absl::StatusOr<std::unique_ptr<PsMetrics>> ps =
      PsMetrics::Create(&ps_registry);
  if (!ps.ok()) Die(ps.status());
  absl::StatusOr<std::unique_ptr<MetricsRegistry::RefresherHandle>> ps_proc =
      ExportProcessMetrics(&ps_registry);
  if (!ps_proc.ok()) Die(ps_proc.status());
  StatsResponse stats;
  stats.set_num_variables(4);
  stats.set_total_elements(203530);
  StalenessHistogram staleness;  // the server's own, as it fills Stats
  for (int64_t s = 0; s < 100000; ++s) staleness.Record(s % 40);
  staleness.AddTo(stats);
  HistogramCell* apply = (*ps)->apply_seconds();
  const double per_push = NanosPer(steps, [&](int) {
    const absl::Time t0 = absl::Now();
    apply->Observe(absl::ToDoubleSeconds(absl::Now() - t0));
  });
  size_t ps_bytes = 0, worker_bytes = 0;
  const double ps_scrape = NanosPer(scrapes, [&](int i) {
    stats.set_pulls(i);
    stats.set_pushes(i);
    absl::Status refreshed = (*ps)->Refresh(stats, ASYNC);
    if (!refreshed.ok()) Die(refreshed);
    ps_registry.Refresh();
    ps_bytes = PrometheusText(ps_registry.Snapshot()).size();
  });
  const double worker_scrape = NanosPer(scrapes, [&](int) {
    worker_registry.Refresh();
    worker_bytes = PrometheusText(worker_registry.Snapshot()).size();
  });

  // System metrics into an event file.
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir =
      absl::StrFormat("%s/metrics_cost_bench.%d", tmp ? tmp : "/tmp", getpid());
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create(dir);
  if (!writer.ok()) Die(writer.status());
  SystemMetricsLogger::Options options;
  options.start_thread = false;
  SystemMetricsLogger logger(writer->get(), options);
  const double per_sample = NanosPer(absl::GetFlag(FLAGS_samples), [&](int) {
    absl::Status written = logger.SampleOnce();
    if (!written.ok()) Die(written);
  });
  std::remove((*writer)->path().c_str());
  rmdir(dir.c_str());

  std::printf("worker metric updates per step:     %8.1f ns\n", per_step);
  std::printf("ps apply-time observation per push: %8.1f ns\n", per_push);
  std::printf("ps scrape (refresh+render, %zu B):  %8.1f us\n", ps_bytes,
              ps_scrape / 1e3);
  std::printf("worker scrape (%zu B):              %8.1f us\n", worker_bytes,
              worker_scrape / 1e3);
  std::printf("system-metrics sample to event file: %7.1f us\n",
              per_sample / 1e3);
  std::printf(
      "share of one core: scrapes at 1/s %.4f%% (ps) %.4f%% (worker); "
      "samples at 1/5s %.4f%%\n",
      ps_scrape / 1e9 * 100, worker_scrape / 1e9 * 100, per_sample / 5e9 * 100);
  return 0;
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psflow::Run();
}
