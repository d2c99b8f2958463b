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

// One table's distinct ids, split by server: for every position of the
// caller's ids, which server and which slot of that server's list.
struct Routed {
  std::vector<std::vector<int64_t>> ids;  // per server, distinct
  std::vector<int> server;                // per caller position
  std::vector<int64_t> slot;              // per caller position
};

Routed Route(absl::Span<const int64_t> ids, int servers, bool distinct) {
  Routed routed;
  routed.ids.resize(servers);
  routed.server.resize(ids.size());
  routed.slot.resize(ids.size());
  if (distinct) {
    // Each server's share, with room for the hash's unevenness: no growth
    // in the loop.
    for (auto& server_ids : routed.ids) {
      server_ids.reserve(ids.size() / servers + ids.size() / 16 + 16);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const int server = RowServer(ids[i], servers);
      routed.server[i] = server;
      routed.slot[i] = static_cast<int64_t>(routed.ids[server].size());
      routed.ids[server].push_back(ids[i]);
    }
    return routed;
  }
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

// Everything a rows call keeps until its last server answered: the
// callbacks and the handle share it, so nothing the transport writes or
// reads belongs to the caller.
struct RowsHandle::State {
  explicit State(int calls) : left(calls) {}

  void Done(const absl::Status& status) {
    MutexLock lock(&mu);
    if (!status.ok() && this->status.ok()) this->status = status;
    --left;
  }

  Mutex mu;
  int left ABSL_GUARDED_BY(mu);
  absl::Status status ABSL_GUARDED_BY(mu);
  int64_t lowest ABSL_GUARDED_BY(mu) = INT64_MAX;
  // Pulls: the first Wait() copied the rows to the caller.
  bool scattered ABSL_GUARDED_BY(mu) = false;

  // Set before the calls start, constant after.
  bool pull = false;
  std::vector<Routed> routed;            // per table
  std::vector<int> dims;                 // per table
  std::vector<absl::Span<float>> dest;   // pulls: the caller's, per table
  std::vector<std::vector<float>> data;  // per server: received rows or sums
  std::vector<std::vector<int64_t>> offsets;  // per server, per table
  std::vector<PullRowsRequest> pull_requests;
  std::vector<PushRowsRequest> push_requests;
  std::vector<std::vector<absl::Span<const int64_t>>> ids;  // per server
};

namespace {

bool AllAnswered(RowsHandle::State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return s->left == 0;
}

}  // namespace

RowsHandle::~RowsHandle() {
  // Waits for the calls, but copies nothing: the caller's buffers may be
  // gone by now.
  MutexLock lock(&state_->mu);
  state_->mu.Await(Condition(&AllAnswered, state_.get()));
}

absl::Status RowsHandle::Wait() {
  State& s = *state_;
  MutexLock lock(&s.mu);
  s.mu.Await(Condition(&AllAnswered, &s));
  if (s.pull && s.status.ok() && !s.scattered) {
    // Scatter every server's rows to the caller's positions.
    s.scattered = true;
    for (size_t t = 0; t < s.routed.size(); ++t) {
      const int dim = s.dims[t];
      const Routed& r = s.routed[t];
      for (size_t i = 0; i < r.server.size(); ++i) {
        const int server = r.server[i];
        std::memcpy(
            s.dest[t].data() + i * dim,
            s.data[server].data() + s.offsets[server][t] + r.slot[i] * dim,
            sizeof(float) * dim);
      }
    }
  }
  return s.status;
}

int64_t RowsHandle::version() const {
  MutexLock lock(&state_->mu);
  return state_->lowest == INT64_MAX ? 0 : state_->lowest;
}

namespace {

// Routes every table's ids and sizes each server's share of the rows.
void RouteTables(absl::Span<const ParameterClient::TableRows> tables,
                 int servers, RowsHandle::State& s) {
  for (const auto& t : tables) {
    s.routed.push_back(Route(t.ids, servers, t.distinct));
    s.dims.push_back(t.dim);
  }
  s.data.resize(servers);
  s.offsets.resize(servers);
  s.ids.resize(servers);
  for (int server = 0; server < servers; ++server) {
    int64_t floats = 0;
    for (size_t t = 0; t < tables.size(); ++t) {
      s.offsets[server].push_back(floats);
      floats +=
          static_cast<int64_t>(s.routed[t].ids[server].size()) * tables[t].dim;
    }
    s.data[server].assign(floats, 0.0f);
  }
}

}  // namespace

absl::StatusOr<int64_t> ParameterClient::PullRows(
    absl::Span<const TableRows> tables, bool train, int64_t min_version) {
  std::shared_ptr<RowsHandle> pull = StartPullRows(tables, train, min_version);
  RETURN_IF_ERROR(pull->Wait());
  return pull->version();
}

std::shared_ptr<RowsHandle> ParameterClient::StartPullRows(
    absl::Span<const TableRows> tables, bool train, int64_t min_version,
    std::optional<WorkerClock> clock) {
  if (absl::Status checked = CheckTables(tables, /*pull=*/true);
      !checked.ok()) {
    auto failed = std::make_shared<RowsHandle::State>(1);
    failed->Done(checked);
    return std::shared_ptr<RowsHandle>(new RowsHandle(std::move(failed)));
  }
  const int servers = static_cast<int>(shards_.size());
  // The count of calls is known once the ids are routed; `left` is set
  // then, before any call starts.
  auto state = std::make_shared<RowsHandle::State>(0);
  RowsHandle::State& s = *state;
  s.pull = true;
  RouteTables(tables, servers, s);
  for (const auto& t : tables) s.dest.push_back(t.rows);
  s.pull_requests.resize(servers);
  // Per server: its rows of every table, back to back.
  std::vector<std::vector<absl::Span<float>>> out(servers);
  int calls = 0;
  for (int server = 0; server < servers; ++server) {
    PullRowsRequest& request = s.pull_requests[server];
    request.set_protocol_version(kProtocolVersion);
    request.set_train(train);
    request.set_min_version(min_version);
    if (clock.has_value()) *request.mutable_worker_clock() = *clock;
    for (size_t t = 0; t < tables.size(); ++t) {
      const std::vector<int64_t>& ids = s.routed[t].ids[server];
      if (ids.empty()) continue;
      RowsPart* part = request.add_parts();
      part->set_table(tables[t].table);
      part->set_num_ids(static_cast<int64_t>(ids.size()));
      s.ids[server].push_back(ids);
      out[server].push_back(
          absl::MakeSpan(s.data[server])
              .subspan(s.offsets[server][t], ids.size() * tables[t].dim));
    }
    calls += request.parts_size() > 0;
  }
  {
    MutexLock lock(&s.mu);
    s.left = calls;
  }
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (int server = 0; server < servers; ++server) {
    if (s.pull_requests[server].parts_size() == 0) continue;
    shards_[server]->PullRows(
        s.pull_requests[server], s.ids[server], std::move(out[server]),
        deadline, [state](absl::StatusOr<PullRowsResponse> response) {
          if (response.ok()) {
            MutexLock lock(&state->mu);
            for (int64_t v : response->versions()) {
              state->lowest = std::min(state->lowest, v);
            }
          }
          state->Done(response.status());
        });
  }
  return std::shared_ptr<RowsHandle>(new RowsHandle(std::move(state)));
}

absl::Status ParameterClient::PushRows(absl::Span<const TableRows> tables,
                                       int64_t version, int worker) {
  return StartPushRows(tables, version, worker)->Wait();
}

std::shared_ptr<RowsHandle> ParameterClient::StartPushRows(
    absl::Span<const TableRows> tables, int64_t version, int worker) {
  if (absl::Status checked = CheckTables(tables, /*pull=*/false);
      !checked.ok()) {
    auto failed = std::make_shared<RowsHandle::State>(1);
    failed->Done(checked);
    return std::shared_ptr<RowsHandle>(new RowsHandle(std::move(failed)));
  }
  const int servers = static_cast<int>(shards_.size());
  auto state = std::make_shared<RowsHandle::State>(0);
  RowsHandle::State& s = *state;
  RouteTables(tables, servers, s);
  // Per server: the summed gradient rows of every table, back to back.
  for (size_t t = 0; t < tables.size(); ++t) {
    const int dim = tables[t].dim;
    const Routed& r = s.routed[t];
    for (size_t i = 0; i < tables[t].ids.size(); ++i) {
      float* sum = s.data[r.server[i]].data() + s.offsets[r.server[i]][t] +
                   r.slot[i] * dim;
      const float* g = tables[t].gradients.data() + i * dim;
      for (int j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  s.push_requests.resize(servers);
  std::vector<std::vector<absl::Span<const float>>> gradients(servers);
  int calls = 0;
  for (int server = 0; server < servers; ++server) {
    PushRowsRequest& request = s.push_requests[server];
    request.set_protocol_version(kProtocolVersion);
    request.set_version(version);
    request.set_worker_index(worker);
    for (size_t t = 0; t < tables.size(); ++t) {
      const std::vector<int64_t>& ids = s.routed[t].ids[server];
      if (ids.empty()) continue;
      RowsPart* part = request.add_parts();
      part->set_table(tables[t].table);
      part->set_num_ids(static_cast<int64_t>(ids.size()));
      s.ids[server].push_back(ids);
      gradients[server].push_back(
          absl::MakeConstSpan(s.data[server])
              .subspan(s.offsets[server][t], ids.size() * tables[t].dim));
    }
    calls += request.parts_size() > 0;
  }
  {
    MutexLock lock(&s.mu);
    s.left = calls;
  }
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  for (int server = 0; server < servers; ++server) {
    if (s.push_requests[server].parts_size() == 0) continue;
    // The state (ids, sums, request) outlives the call: the callback
    // holds it.
    shards_[server]->PushRows(
        s.push_requests[server], s.ids[server], std::move(gradients[server]),
        state, deadline,
        [state, name = &shards_[server]->name(),
         server](absl::StatusOr<PushRowsResponse> response) {
          absl::Status status = response.status();
          const PushRowsRequest& request = state->push_requests[server];
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
          state->Done(status);
        });
  }
  return std::shared_ptr<RowsHandle>(new RowsHandle(std::move(state)));
}

}  // namespace psflow
