#include "client/coordinator_client.h"

#include <algorithm>

#include "proto/protocol.h"

namespace psflow {

RegisterTaskRequest RegisterRequest(const TaskId& task, uint64_t incarnation) {
  RegisterTaskRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_task_type(std::string(TaskTypeName(task.type)));
  request.set_task_index(task.index);
  request.set_incarnation(incarnation);
  return request;
}

StatusRequest StatusRequestFrom(const std::optional<TaskId>& self) {
  StatusRequest request;
  if (self.has_value()) {
    request.set_task_type(std::string(TaskTypeName(self->type)));
    request.set_task_index(self->index);
  }
  return request;
}

StatusRequest StatusChangeRequest(const std::optional<TaskId>& self,
                                  const StatusResponse& known,
                                  absl::Duration wait) {
  StatusRequest request = StatusRequestFrom(self);
  request.set_wait_for_change_ms(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(wait)));
  request.set_known_state(known.state());
  request.set_known_generation(known.generation());
  return request;
}

}  // namespace psflow
