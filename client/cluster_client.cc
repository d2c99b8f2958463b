#include "client/cluster_client.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/grpc_ps_shard.h"
#include "client/shared_memory_shard.h"
#include "common/job/placement_proto.h"
#include "common/status_macros.h"
#include "ps/shared_memory_sessions.h"

namespace psflow {

std::unique_ptr<PsShard> ConnectPsShard(const std::string& address,
                                        std::string name,
                                        const GrpcPsShard::Options& options,
                                        int64_t shared_memory_bytes) {
  auto transport =
      std::make_unique<GrpcPsShard>(address, std::move(name), options);
  if (shared_memory_bytes <= 0) return transport;
  return std::make_unique<SharedMemoryShard>(std::move(transport),
                                             shared_memory_bytes);
}

std::unique_ptr<ParameterClient> ConnectToParameterServers(
    const TfConfig& config, const Placement& placement,
    const ParameterClient::Options& options,
    const TransportSecurity& security) {
  GrpcPsShard::Options shard_options;
  shard_options.security = security;
  std::vector<std::unique_ptr<PsShard>> shards;
  for (const auto& [index, address] : config.cluster.job(TaskType::kPs)) {
    // Room for a worker's tensors in place besides the calls' pieces; pages
    // are only touched as they are used.
    int64_t region_bytes = kDefaultSharedMemoryBytes;
    if (index >= 0 && index < static_cast<int>(placement.bytes_per_ps.size())) {
      // Capped first, so that no model size can overflow the sum.
      const int64_t tensors =
          std::min(kMaxSharedMemoryRegionBytes, placement.bytes_per_ps[index]);
      region_bytes = std::min(kMaxSharedMemoryRegionBytes,
                              region_bytes + kSharedTensorSets * tensors);
    }
    shards.push_back(ConnectPsShard(address,
                                    absl::StrCat("ps-", index, " at ", address),
                                    shard_options, region_bytes));
  }
  return std::make_unique<ParameterClient>(std::move(shards), placement,
                                           options);
}

namespace {

std::vector<std::string> AddressesOf(const TfConfig& config, TaskType type) {
  std::vector<std::string> addresses;
  for (const auto& [index, address] : config.cluster.job(type)) {
    addresses.push_back(address);
  }
  return addresses;
}

absl::Status SameList(
    const std::vector<std::string>& ours,
    const google::protobuf::RepeatedPtrField<std::string>& chiefs,
    absl::string_view job) {
  if (chiefs.empty()) return absl::OkStatus();  // a chief that did not say
  if (absl::c_equal(ours, chiefs)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "this task's TF_CONFIG lists the \"", job, "\" tasks [",
      absl::StrJoin(ours, ", "), "], but the chief's lists [",
      absl::StrJoin(chiefs, ", "),
      "]; every task of a job must be given the same \"cluster\" (in the "
      "same order): fix this task's TF_CONFIG"));
}

}  // namespace

absl::Status CheckSameCluster(const TfConfig& config, const JobSpec& spec) {
  RETURN_IF_ERROR(
      SameList(AddressesOf(config, TaskType::kPs), spec.ps_addresses(), "ps"));
  if (config.task.type == TaskType::kWorker) {
    RETURN_IF_ERROR(SameList(AddressesOf(config, TaskType::kWorker),
                             spec.worker_addresses(), "worker"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ParameterClient>> PlaceJobOnParameterServers(
    const TfConfig& config, const JobSpec& spec,
    const TransportSecurity& security) {
  RETURN_IF_ERROR(CheckSameCluster(config, spec));
  ASSIGN_OR_RETURN(
      Placement placement,
      PlacementFromProto(spec, config.cluster.NumTasks(TaskType::kPs)));
  return ConnectToParameterServers(config, placement,
                                   ParameterClient::Options(), security);
}

absl::StatusOr<std::unique_ptr<ParameterClient>> ConnectToJobParameterServers(
    const TfConfig& config, const JobSpec& spec,
    const TransportSecurity& security) {
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                   PlaceJobOnParameterServers(config, spec, security));
  RETURN_IF_ERROR(client->Configure(spec.ps_config()));
  return client;
}

}  // namespace psflow
