// A worker's training loop: pull, compute, push, report.
//
//   async: the pull of the next parameters runs while this step computes
//          (one step more staleness, no idle wait); each push is applied
//          on arrival.
//   sync:  pull the current step's parameters (the server answers once the
//          step is applied), compute, push with that step's version; a
//          push that arrives after the step closed (a backup's) is dropped
//          by the server and counted here.
//
// The loop ends when the parameter servers' global step (the version a
// pull returns) reaches the job's total, so every worker stops at the same
// point without asking the chief each step. A heartbeat with progress goes
// to the chief about once a second; the chief's answer can end the loop
// (the job failed elsewhere).
#ifndef PSFLOW_WORKER_TRAINER_H_
#define PSFLOW_WORKER_TRAINER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "client/coordinator_client.h"
#include "common/metrics/event_file_writer.h"
#include "common/rpc/transport_security.h"
#include "common/tf_config.h"
#include "model/device/device.h"
#include "proto/coordinator.pb.h"

namespace psflow {

struct TrainerOptions {
  TfConfig tf_config;
  TransportSecurity security;
  JobSpec spec;
  Device* device = nullptr;
  CoordinatorClient* coordinator = nullptr;
  uint64_t incarnation = 0;
  // TensorBoard event file for this worker's metrics; may be null.
  EventFileWriter* metrics = nullptr;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // How long the worker rides out failing parameter-server calls (a lost
  // server) or a pause, waiting for the chief to restore the model and
  // resume, before it gives up with the error.
  absl::Duration recovery_timeout = absl::Minutes(5);
};

absl::Status RunTrainer(const TrainerOptions& options);

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINER_H_
