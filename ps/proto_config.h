// Converts the wire/job-config protos for optimizers and learning-rate
// schedules into the validated parameters the PS uses, filling proto3
// defaults (momentum 0.9, beta1 0.9, beta2 0.999, epsilon 1e-7, ...).
// Errors are InvalidArgument and name the field.
#ifndef PSFLOW_PS_PROTO_CONFIG_H_
#define PSFLOW_PS_PROTO_CONFIG_H_

#include "absl/status/statusor.h"
#include "proto/optimizer.pb.h"
#include "ps/lr_schedule.h"
#include "ps/optimizer.h"

namespace psflow {

absl::StatusOr<OptimizerParams> OptimizerParamsFromProto(
    const OptimizerConfig& proto);

absl::StatusOr<LrScheduleConfig> LrScheduleFromProto(
    const LearningRateSchedule& proto);

}  // namespace psflow

#endif  // PSFLOW_PS_PROTO_CONFIG_H_
