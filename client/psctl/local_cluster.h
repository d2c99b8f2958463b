// `psctl local`: a whole psflow cluster on 127.0.0.1 for development, the
// demo and multi-process tests.
//
// Picks free ports, writes one TF_CONFIG per task (also saved under
// <dir>/tf_config/), starts ps_server, worker, evaluator (and chief)
// processes, prefixes every line they print with "[<task>] " (and keeps a
// log per task under <dir>), stops them all on SIGINT/SIGTERM/SIGHUP, and
// returns the job's result as an exit status. The chief's outcome is in
// <dir>/result.json. Should psctl die without stopping them (SIGKILL), the
// kernel sends every task SIGTERM, so none outlives it.
#ifndef PSFLOW_CLIENT_PSCTL_LOCAL_CLUSTER_H_
#define PSFLOW_CLIENT_PSCTL_LOCAL_CLUSTER_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psflow {

struct LocalClusterOptions {
  std::string job_path;
  int num_ps = 1;
  int num_workers = 2;
  bool evaluator = true;
  // A separate chief process; otherwise worker 0 runs the chief's duties.
  bool chief = false;
  std::string dir;
  // Where the role binaries are (ps/ps_server, worker/worker, ...), e.g.
  // bazel-bin.
  std::string bin_dir;
  // Passed to workers and the evaluator.
  std::string device = "auto";
  // False runs the servers with --shared_memory=false: every tensor byte
  // then crosses loopback TCP, as between hosts.
  bool shared_memory = true;
  // False runs the servers with --shared_memory_ring=false: calls through
  // shared memory are still gRPC calls, one each.
  bool shared_memory_ring = true;
  // Given to the chief. Empty: <dir>/checkpoints, emptied first so that
  // every run starts afresh; a directory given here is kept, so a second
  // run resumes from its newest checkpoint.
  std::string checkpoint_dir;
  // Every task serves Prometheus metrics on a port of its own
  // (--metrics_port); the targets are listed, in Prometheus's file_sd
  // format, in <dir>/prometheus_targets.json.
  bool metrics = false;
  // Mutual TLS between the tasks: a new CA and certificates for this run
  // in <dir>/tls (psctl certs gen's layout), every task started with
  // --tls_dir there.
  bool tls = true;
  // Fresh job tokens for this run in <dir>/tokens (psctl tokens gen's
  // layout), every task started with --token_dir there: another local
  // user cannot steer the job.
  bool tokens = true;
  // More flags for some workers, by index (e.g. --slowdown for
  // straggler experiments).
  std::map<int, std::vector<std::string>> worker_flags;
  // Stops everything and fails after this long (0: no limit).
  absl::Duration timeout = absl::ZeroDuration();
  // Stops everything and fails when the job's state and global step (as
  // the chief reports them) stay the same this long (0: never). A bound on
  // hangs that does not depend on the machine's speed.
  absl::Duration stall_timeout = absl::ZeroDuration();
};

// Runs the job to its end; returns the exit status to use (0 success).
// Errors are for problems before anything started (bad options, a job
// config that does not parse, missing binaries) and for a task that could
// not be started (a binary that cannot run, no file descriptors left):
// then the tasks started before it have been stopped and reaped, and the
// error names the task and why.
absl::StatusOr<int> RunLocalCluster(const LocalClusterOptions& options,
                                    std::ostream& out);

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_LOCAL_CLUSTER_H_
