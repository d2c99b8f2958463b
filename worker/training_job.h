// A worker's whole part in a job: reads its shard of the training data,
// builds the job's model on its device, connects to the parameter servers
// and runs a Trainer (worker/trainer.h) until the job ends.
#ifndef PSFLOW_WORKER_TRAINING_JOB_H_
#define PSFLOW_WORKER_TRAINING_JOB_H_

#include <cstdint>

#include "absl/status/status.h"
#include "client/coordinator_client.h"
#include "common/metrics/event_file_writer.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace psflow {

struct TrainingJobOptions {
  TfConfig tf_config;
  TransportSecurity security;
  JobSpec spec;
  // Not owned; must outlive RunTrainingJob. `metrics` may be null.
  Device* device = nullptr;
  CoordinatorClient* coordinator = nullptr;
  EventFileWriter* metrics = nullptr;
  uint64_t incarnation = 0;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  RecoveryPolicy recovery;
  // TrainerOptions::slowdown (experiments only).
  Slowdown slowdown;
  // TrainerOptions::background_calls.
  bool background_calls = true;
  // TrainerOptions::push_then_pull.
  bool push_then_pull = true;
  // Optional Prometheus metrics the trainer updates.
  const WorkerMetrics* live_metrics = nullptr;
  // What the worker's timeouts and heartbeats are measured on.
  Clock* clock = &RealClock();
};

// OK when this worker's part ended well (the job trained to its end);
// otherwise why not.
absl::Status RunTrainingJob(const TrainingJobOptions& options);

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINING_JOB_H_
