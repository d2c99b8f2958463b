// ParameterClient's embedding-table calls: deduplicating ids, routing each
// to the server that holds its row, one request per server for all tables.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/job/row_placement.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "proto/protocol.h"

namespace psflow {
namespace {

// Waits for one call per server; keeps the first error.
class Countdown {
 public:
  explicit Countdown(int calls) : left_(calls) {}
  void Done(const absl::Status& status) {
    MutexLock lock(&mu_);
    if (!status.ok() && status_.ok()) status_ = status;
    --left_;
  }
  absl::Status Wait() {
    MutexLock lock(&mu_);
    auto done = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return left_ == 0; };
    mu_.Await(Condition(&done));
    return status_;
  }

 private:
  Mutex mu_;
  int left_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// One table's distinct ids, split by server: for every position of the
// caller's ids, which server and which slot of that server's list.
struct Routed {
  std::vector<std::vector<int64_t>> ids;  // per server, distinct
  std::vector<int> server;                // per caller position
  std::vector<int64_t> slot;              // per caller position
};

Routed Route(absl::Span<const int64_t> ids, int servers) {
  Routed routed;
  routed.ids.resize(servers);
  routed.server.resize(ids.size());
  routed.slot.resize(ids.size());
  absl::flat_hash_map<int64_t, std::pair<int, int64_t>> seen;
  seen.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, added] = seen.try_emplace(ids[i]);
    if (added) {
      const int server = RowServer(ids[i], servers);
      it->second = {server, static_cast<int64_t>(routed.ids[server].size())};
      routed.ids[server].push_back(ids[i]);
    }
    routed.server[i] = it->second.first;
    routed.slot[i] = it->second.second;
  }
  return routed;
}

absl::Status CheckTables(absl::Span<const ParameterClient::TableRows> tables,
                         bool pull) {
  for (const auto& t : tables) {
    const size_t want = t.ids.size() * static_cast<size_t>(t.dim);
    const size_t have = pull ? t.rows.size() : t.gradients.size();
    if (t.dim < 1 || have != want) {
      return absl::InvalidArgumentError(
          absl::StrCat(pull ? "pull" : "push", " of embedding table '", t.table,
                       "': ", t.ids.size(), " ids of dimension ", t.dim,
                       " need ", want, " floats, not ", have));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParameterClient::CreateTables(
    const std::vector<EmbeddingTableSpec>& tables) {
  if (tables.empty()) return absl::OkStatus();
  CreateVariablesRequest request;
  request.set_protocol_version(kProtocolVersion);
  for (const EmbeddingTableSpec& spec : tables) *request.add_tables() = spec;
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (const auto& shard : shards_) {
    if (absl::Status created = shard->CreateVariables(request, deadline);
        !created.ok()) {
      return absl::Status(created.code(),
                          absl::StrCat("creating embedding tables on ",
                                       shard->name(), ": ", created.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParameterClient::PullRows(
    absl::Span<const TableRows> tables, bool train, int64_t min_version) {
  RETURN_IF_ERROR(CheckTables(tables, /*pull=*/true));
  const int servers = static_cast<int>(shards_.size());
  std::vector<Routed> routed;
  for (const auto& t : tables) routed.push_back(Route(t.ids, servers));
  // Per server: its rows of every table, back to back.
  std::vector<std::vector<float>> received(servers);
  std::vector<PullRowsRequest> requests(servers);
  std::vector<std::vector<absl::Span<const int64_t>>> ids(servers);
  std::vector<std::vector<absl::Span<float>>> out(servers);
  std::vector<std::vector<int64_t>> offsets(servers);  // per table
  for (int s = 0; s < servers; ++s) {
    int64_t floats = 0;
    for (size_t t = 0; t < tables.size(); ++t) {
      offsets[s].push_back(floats);
      floats += static_cast<int64_t>(routed[t].ids[s].size()) * tables[t].dim;
    }
    received[s].resize(floats);
    requests[s].set_protocol_version(kProtocolVersion);
    requests[s].set_train(train);
    requests[s].set_min_version(min_version);
    for (size_t t = 0; t < tables.size(); ++t) {
      if (routed[t].ids[s].empty()) continue;
      RowsPart* part = requests[s].add_parts();
      part->set_table(tables[t].table);
      part->set_num_ids(static_cast<int64_t>(routed[t].ids[s].size()));
      ids[s].push_back(routed[t].ids[s]);
      out[s].push_back(
          absl::MakeSpan(received[s])
              .subspan(offsets[s][t], routed[t].ids[s].size() * tables[t].dim));
    }
  }
  int calls = 0;
  for (int s = 0; s < servers; ++s) calls += requests[s].parts_size() > 0;
  Countdown countdown(calls);
  Mutex version_mu;
  int64_t lowest = INT64_MAX;
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (int s = 0; s < servers; ++s) {
    if (requests[s].parts_size() == 0) continue;
    shards_[s]->PullRows(requests[s], ids[s], out[s], deadline,
                         [&countdown, &version_mu,
                          &lowest](absl::StatusOr<PullRowsResponse> response) {
                           if (response.ok()) {
                             MutexLock lock(&version_mu);
                             for (int64_t v : response->versions()) {
                               lowest = std::min(lowest, v);
                             }
                           }
                           countdown.Done(response.status());
                         });
  }
  RETURN_IF_ERROR(countdown.Wait());
  // Scatter every server's rows to the caller's positions.
  for (size_t t = 0; t < tables.size(); ++t) {
    const int dim = tables[t].dim;
    for (size_t i = 0; i < tables[t].ids.size(); ++i) {
      const int s = routed[t].server[i];
      std::memcpy(tables[t].rows.data() + i * dim,
                  received[s].data() + offsets[s][t] + routed[t].slot[i] * dim,
                  sizeof(float) * dim);
    }
  }
  MutexLock lock(&version_mu);
  return lowest == INT64_MAX ? 0 : lowest;
}

absl::Status ParameterClient::PushRows(absl::Span<const TableRows> tables,
                                       int64_t version, int worker) {
  RETURN_IF_ERROR(CheckTables(tables, /*pull=*/false));
  const int servers = static_cast<int>(shards_.size());
  std::vector<Routed> routed;
  for (const auto& t : tables) routed.push_back(Route(t.ids, servers));
  // Per server: the summed gradient rows of every table, back to back.
  std::vector<std::vector<float>> sums(servers);
  std::vector<std::vector<int64_t>> offsets(servers);
  for (int s = 0; s < servers; ++s) {
    int64_t floats = 0;
    for (size_t t = 0; t < tables.size(); ++t) {
      offsets[s].push_back(floats);
      floats += static_cast<int64_t>(routed[t].ids[s].size()) * tables[t].dim;
    }
    sums[s].assign(floats, 0.0f);
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    const int dim = tables[t].dim;
    for (size_t i = 0; i < tables[t].ids.size(); ++i) {
      float* sum = sums[routed[t].server[i]].data() +
                   offsets[routed[t].server[i]][t] + routed[t].slot[i] * dim;
      const float* g = tables[t].gradients.data() + i * dim;
      for (int j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  std::vector<PushRowsRequest> requests(servers);
  std::vector<std::vector<absl::Span<const int64_t>>> ids(servers);
  std::vector<std::vector<absl::Span<const float>>> gradients(servers);
  int calls = 0;
  for (int s = 0; s < servers; ++s) {
    requests[s].set_protocol_version(kProtocolVersion);
    requests[s].set_version(version);
    requests[s].set_worker_index(worker);
    for (size_t t = 0; t < tables.size(); ++t) {
      if (routed[t].ids[s].empty()) continue;
      RowsPart* part = requests[s].add_parts();
      part->set_table(tables[t].table);
      part->set_num_ids(static_cast<int64_t>(routed[t].ids[s].size()));
      ids[s].push_back(routed[t].ids[s]);
      gradients[s].push_back(absl::MakeConstSpan(sums[s]).subspan(
          offsets[s][t], routed[t].ids[s].size() * tables[t].dim));
    }
    calls += requests[s].parts_size() > 0;
  }
  Countdown countdown(calls);
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (int s = 0; s < servers; ++s) {
    if (requests[s].parts_size() == 0) continue;
    // The buffers outlive the call: this function waits for every answer.
    shards_[s]->PushRows(
        requests[s], ids[s], gradients[s], nullptr, deadline,
        [&countdown, name = &shards_[s]->name(),
         &request = requests[s]](absl::StatusOr<PushRowsResponse> response) {
          absl::Status status = response.status();
          if (response.ok()) {
            for (int i = 0; i < response->results_size() && status.ok(); ++i) {
              const PushPartResult& r = response->results(i);
              if (r.code() != 0) {
                status = absl::Status(
                    static_cast<absl::StatusCode>(r.code()),
                    absl::StrCat("push of rows of '", request.parts(i).table(),
                                 "' to ", *name, ": ", r.message()));
              }
            }
          }
          countdown.Done(status);
        });
  }
  return countdown.Wait();
}

}  // namespace psflow
