#include "client/coordinator_client.h"

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

}  // namespace psflow
