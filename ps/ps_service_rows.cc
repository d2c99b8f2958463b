// PsService's embedding-table requests: PullRows (waiting for a SYNC step
// like a dense pull) and PushRows.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/ps_service.h"

namespace psflow {

std::shared_ptr<PsService::PendingRows> PsService::PullRows(
    const PullRowsRequest& request, std::vector<absl::Span<const int64_t>> ids,
    std::vector<absl::Span<float>> out, RowsDone done) {
  absl::StatusOr<std::vector<EmbeddingTable*>> tables =
      core_->ResolveRows(request.protocol_version(), request.parts());
  if (!tables.ok()) {
    done(tables.status());
    return nullptr;
  }
  if (ids.size() != tables->size() ||
      (!out.empty() && out.size() != tables->size())) {
    done(absl::InvalidArgumentError(
        absl::StrCat("rows pull of ", tables->size(), " parts with ",
                     ids.size(), " id lists and ", out.size(), " buffers")));
    return nullptr;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t want = ids[i].size() * (*tables)[i]->dim();
    if (static_cast<int64_t>(ids[i].size()) != request.parts(i).num_ids() ||
        (!out.empty() && out[i].size() != want)) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "rows pull of '", (*tables)[i]->name(), "': ", ids[i].size(),
          " ids for a part of ", request.parts(i).num_ids(),
          (out.empty() ? ""
                       : absl::StrCat(", a buffer of ", out[i].size(),
                                      " floats for ", want)))));
      return nullptr;
    }
  }
  // BOUNDED: a worker's rows pull for its step waits for the slowest live
  // worker, as its dense pull does.
  Gate gate;
  if (request.has_worker_clock()) {
    gate.clocks = core_->worker_clocks();  // null in other modes: no gate
    if (gate.clocks != nullptr) {
      const WorkerClock& wc = request.worker_clock();
      if (wc.join()) {
        done(absl::InvalidArgumentError(absl::StrCat(
            "rows pull of worker ", wc.worker_index(),
            " asks to join the bound; a worker joins with its dense pull, "
            "then pulls rows for the step it goes on from")));
        return nullptr;
      }
      if (absl::Status ok = gate.clocks->Check(wc.worker_index(), wc.clock());
          !ok.ok()) {
        done(ok);
        return nullptr;
      }
      gate.worker = wc.worker_index();
      gate.clock = wc.clock();
    }
  }
  if (request.min_version() > 0 || gate.clocks != nullptr) {
    // A pull that may wait holds its ids (up to 32 MiB) until it answers:
    // all of them together are bounded.
    int64_t held = 0;
    for (const auto& part : ids) {
      held += static_cast<int64_t>(part.size() * sizeof(int64_t));
    }
    if (waiting_row_bytes_.fetch_add(held) + held > max_waiting_row_bytes_) {
      waiting_row_bytes_ -= held;
      done(absl::ResourceExhaustedError(
          absl::StrCat("rows pulls waiting for a step would hold more than ",
                       max_waiting_row_bytes_,
                       " bytes of ids on this server; a worker "
                       "waits for one step at a time")));
      return nullptr;
    }
    done = [this, held, done](absl::StatusOr<RowsAnswer> answer) {
      waiting_row_bytes_ -= held;
      done(std::move(answer));
    };
  }
  std::shared_ptr<PendingRows> pull(new PendingRows(
      this, *std::move(tables), std::move(ids), std::move(out), request.train(),
      request.min_version(), gate, std::move(done)));
  return pull->Start() ? pull : nullptr;
}

bool PsService::PendingRows::Start() {
  {
    MutexLock lock(&mu_);
    if (min_version_ > 0) {
      std::vector<EmbeddingTable*> distinct = tables_;
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()),
                     distinct.end());
      // Each wait keeps the pull alive until it fires or is cancelled.
      std::shared_ptr<PendingRows> self = shared_from_this();
      for (EmbeddingTable* table : distinct) {
        std::optional<uint64_t> id = table->WhenVersionReached(
            min_version_, [self, table] { self->OnReached(table); });
        if (id.has_value()) waits_.emplace_back(table, *id);
      }
    }
    if (gate_.clocks != nullptr) {
      std::shared_ptr<PendingRows> self = shared_from_this();
      std::optional<uint64_t> id =
          gate_.clocks->WhenAllowed(gate_.clock, [self] {
            self->gate_.clocks->CountWait(absl::Now() - self->created_);
            self->OnReached(nullptr);
          });
      if (id.has_value()) waits_.emplace_back(nullptr, *id);
    }
    if (!waits_.empty()) return true;
    answer_claimed_ = true;
  }
  Answer();
  return false;
}

void PsService::PendingRows::OnReached(EmbeddingTable* table) {
  {
    MutexLock lock(&mu_);
    if (answer_claimed_) return;
    waits_.erase(
        std::remove_if(waits_.begin(), waits_.end(),
                       [table](const auto& w) { return w.first == table; }),
        waits_.end());
    if (!waits_.empty()) return;
    answer_claimed_ = true;
  }
  Answer();
}

void PsService::PendingRows::Cancel() {
  std::string waiting_for;
  {
    MutexLock lock(&mu_);
    if (answer_claimed_) return;
    answer_claimed_ = true;
    for (const auto& [table, id] : waits_) {
      if (table == nullptr) {
        if (gate_.clocks->Cancel(id)) {
          gate_.clocks->CountWait(absl::Now() - created_);
        }
        waiting_for =
            absl::StrCat("waiting for a slower worker: ",
                         gate_.clocks->DescribeWait(gate_.worker, gate_.clock),
                         " (bounded staleness)");
        continue;
      }
      table->CancelWait(id);
      if (waiting_for.empty()) {
        waiting_for = absl::StrCat("waiting for step ", min_version_,
                                   " of embedding table '", table->name(),
                                   "' (at step ", table->Version(), ")");
      }
    }
    waits_.clear();
  }
  done_(absl::DeadlineExceededError(
      absl::StrCat("rows pull cancelled while ", waiting_for,
                   "; in sync mode a step completes once every worker "
                   "pushed it")));
}

void PsService::PendingRows::Answer() {
  RowsAnswer answer;
  std::vector<absl::Span<float>> out = out_;
  if (out.empty()) {
    for (size_t i = 0; i < tables_.size(); ++i) {
      answer.num_floats +=
          static_cast<int64_t>(ids_[i].size()) * tables_[i]->dim();
    }
    answer.rows = service_->pool_->Acquire(answer.num_floats);
    int64_t offset = 0;
    for (size_t i = 0; i < tables_.size(); ++i) {
      const int64_t n =
          static_cast<int64_t>(ids_[i].size()) * tables_[i]->dim();
      out.push_back(answer.rows->span().subspan(offset, n));
      offset += n;
    }
  }
  absl::StatusOr<PullRowsResponse> response =
      service_->core_->PullRows(tables_, ids_, train_, out);
  if (!response.ok()) return done_(response.status());
  answer.response = *std::move(response);
  done_(std::move(answer));
}

absl::StatusOr<std::vector<EmbeddingTable*>> PsService::ResolvePushRows(
    const PushRowsRequest& request) const {
  return core_->ResolveRows(request.protocol_version(), request.parts());
}

absl::StatusOr<PushRowsResponse> PsService::PushRows(
    const PushRowsRequest& request, absl::Span<EmbeddingTable* const> tables,
    absl::Span<const absl::Span<const int64_t>> ids,
    absl::Span<const absl::Span<const float>> gradients) {
  if (ids.size() != tables.size() || gradients.size() != tables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows push of ", tables.size(), " parts with ", ids.size(),
                     " id lists and ", gradients.size(), " gradient lists"));
  }
  RETURN_IF_ERROR(core_->CheckWorkerIndex(request.worker_index()));
  return core_->PushRows(tables, ids, gradients, request.version(),
                         request.worker_index());
}

}  // namespace psflow
