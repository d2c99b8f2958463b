// ParameterServerCore's embedding tables: creating them from their specs,
// resolving sparse requests, pulls and checked pushes of rows.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/float_mode.h"
#include "common/job/update_rule.h"
#include "common/path_name.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/ps_core.h"
#include "ps/ps_core_checks.h"

namespace psflow {
namespace {

absl::StatusOr<EmbeddingTableOptions> OptionsFromSpec(
    const EmbeddingTableSpec& spec) {
  EmbeddingTableOptions options;
  options.name = spec.name();
  options.dim = spec.dim();
  const RowInitializerConfig& init = spec.initializer();
  options.initializer.seed = init.seed();
  switch (init.kind()) {
    case RowInitializerConfig::KIND_UNSPECIFIED:
      options.initializer.kind = RowInitializer::Kind::kTruncatedNormal;
      options.initializer.scale =
          spec.dim() > 0 ? 1.0f / std::sqrt(static_cast<float>(spec.dim()))
                         : 0.0f;
      break;
    case RowInitializerConfig::ZEROS:
      options.initializer.kind = RowInitializer::Kind::kZeros;
      break;
    case RowInitializerConfig::UNIFORM:
      options.initializer.kind = RowInitializer::Kind::kUniform;
      options.initializer.scale = init.scale();
      break;
    case RowInitializerConfig::TRUNCATED_NORMAL:
      options.initializer.kind = RowInitializer::Kind::kTruncatedNormal;
      options.initializer.scale = init.scale();
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("embedding table '", spec.name(), "': initializer kind ",
                       static_cast<int>(init.kind()),
                       " is unknown; use ZEROS, UNIFORM or TRUNCATED_NORMAL"));
  }
  options.min_frequency = spec.min_frequency();
  options.unadmitted_zeros = spec.unadmitted_zeros();
  if (spec.admission_counters() != 0) {
    options.admission_counters = spec.admission_counters();
  }
  options.evict_after_steps = spec.evict_after_steps();
  options.max_rows = spec.max_rows();
  RETURN_IF_ERROR(ValidateEmbeddingTableOptions(options));
  return options;
}

// The table's own learning-rate schedule; InvalidArgument naming the
// table and the field.
absl::StatusOr<std::unique_ptr<LrSchedule>> ScheduleFromSpec(
    const EmbeddingTableSpec& spec) {
  absl::StatusOr<LrScheduleConfig> config =
      LrScheduleFromProto(spec.learning_rate());
  absl::StatusOr<LrSchedule> schedule =
      config.ok() ? LrSchedule::Create(*config)
                  : absl::StatusOr<LrSchedule>(config.status());
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table '", spec.name(),
                     "': learning_rate: ", schedule.status().message()));
  }
  return std::make_unique<LrSchedule>(*std::move(schedule));
}

}  // namespace

absl::Status ParameterServerCore::CreateTablesLocked(
    const CreateVariablesRequest& request, bool create) {
  std::set<std::string> listed;
  for (const EmbeddingTableSpec& spec : request.tables()) {
    // Table names name files in exports (<table>/ids.npy in an archive).
    RETURN_IF_ERROR(CheckPathName(spec.name(), "embedding table name"));
    ASSIGN_OR_RETURN(EmbeddingTableOptions options, OptionsFromSpec(spec));
    if (!listed.insert(spec.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding table '", spec.name(),
                       "' is listed twice in one request"));
    }
    if (variables_.count(spec.name()) > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", spec.name(),
                       "' exists as a dense variable; give the embedding table "
                       "another name"));
    }
    auto existing = tables_.find(spec.name());
    if (existing != tables_.end()) {
      if (!google::protobuf::util::MessageDifferencer::Equals(
              existing->second.spec, spec)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "embedding table '", spec.name(),
            "' exists with another spec (dimension, initializer, optimizer, "
            "learning rate or policies); use another name or restart the "
            "parameter servers"));
      }
      continue;
    }
    std::unique_ptr<Optimizer> own;
    if (spec.has_optimizer()) {
      absl::StatusOr<OptimizerParams> params =
          OptimizerParamsFromProto(spec.optimizer());
      if (params.ok()) {
        absl::StatusOr<std::unique_ptr<Optimizer>> made =
            Optimizer::Create(*params);
        if (made.ok()) {
          own = *std::move(made);
        } else {
          params = made.status();
        }
      }
      if (!params.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("embedding table '", spec.name(),
                         "': ", params.status().message()));
      }
    }
    std::unique_ptr<LrSchedule> own_schedule;
    if (spec.has_learning_rate()) {
      absl::StatusOr<std::unique_ptr<LrSchedule>> made = ScheduleFromSpec(spec);
      if (!made.ok()) return made.status();
      own_schedule = *std::move(made);
    }
    if (!create) continue;
    Table entry;
    entry.spec = spec;
    entry.optimizer = std::move(own);
    entry.schedule = std::move(own_schedule);
    const Optimizer* optimizer =
        entry.optimizer != nullptr ? entry.optimizer.get() : rule_.optimizer;
    UpdateRule rule = rule_;
    if (entry.schedule != nullptr) rule.schedule = entry.schedule.get();
    entry.table = std::make_unique<EmbeddingTable>(options, optimizer, rule);
    if (max_variable_bytes_ > 0) {
      entry.table->SetMemoryBudget(
          &table_bytes_,
          max_variable_bytes_ - allocated_floats_ * int64_t{sizeof(float)});
    }
    tables_.emplace(spec.name(), std::move(entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EmbeddingTable*>> ParameterServerCore::ResolveRows(
    uint32_t protocol_version,
    const google::protobuf::RepeatedPtrField<RowsPart>& parts) const {
  RETURN_IF_ERROR(CheckProtocol(protocol_version));
  if (parts.empty() || parts.size() > kMaxBatchParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rows request has ", parts.size(), " parts; send 1 to ",
                     kMaxBatchParts));
  }
  ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckConfiguredLocked());
  std::vector<EmbeddingTable*> tables;
  int64_t ids = 0, rows_bytes = 0;
  for (const RowsPart& part : parts) {
    auto it = tables_.find(part.table());
    if (it == tables_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "no embedding table '", part.table().substr(0, 256),
          "' on this parameter server; the chief creates tables before "
          "training (is the server restarted and not yet restored?)"));
    }
    // Each table once: in SYNC mode a second part would count as the same
    // worker's second gradient and be dropped.
    if (std::find(tables.begin(), tables.end(), it->second.table.get()) !=
        tables.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a rows request names table '", part.table().substr(0, 256),
          "' twice; send each table's ids in one part"));
    }
    if (part.num_ids() < 1 || part.num_ids() > kMaxRowsPerRequest - ids) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a rows request for '", part.table(), "' has ", part.num_ids(),
          " ids; every part needs at least one and a request at most ",
          kMaxRowsPerRequest));
    }
    ids += part.num_ids();
    // The rows must fit in one bulk message either way (a pull's answer, a
    // push's payload): checked before anything is sized by the request.
    rows_bytes += part.num_ids() * (8 + int64_t{4} * it->second.table->dim());
    if (rows_bytes > kMaxBulkMessageBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("a rows request of ", ids, " ids would move more than ",
                       kMaxBulkMessageBytes,
                       " bytes of ids and rows; send fewer ids per request"));
    }
    tables.push_back(it->second.table.get());
  }
  return tables;
}

absl::StatusOr<PullRowsResponse> ParameterServerCore::PullRows(
    absl::Span<EmbeddingTable* const> tables,
    absl::Span<const absl::Span<const int64_t>> ids, bool train,
    absl::Span<const absl::Span<float>> out) {
  PullRowsResponse response;
  for (size_t i = 0; i < tables.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t version, tables[i]->Pull(ids[i], train, out[i]));
    response.add_versions(version);
  }
  pulls_.fetch_add(1, std::memory_order_relaxed);
  return response;
}

absl::StatusOr<PushRowsResponse> ParameterServerCore::PushRows(
    absl::Span<EmbeddingTable* const> tables,
    absl::Span<const absl::Span<const int64_t>> ids,
    absl::Span<const absl::Span<const float>> gradients, int64_t version,
    int worker) {
  EnableFlushToZero();  // the rows' optimizer runs here (ps_core.cc)
  for (size_t i = 0; i < tables.size(); ++i) {
    const size_t want = ids[i].size() * tables[i]->dim();
    if (gradients[i].size() != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("push to embedding table '", tables[i]->name(),
                       "': ", gradients[i].size(), " gradient values for ",
                       ids[i].size(), " ids of dimension ", tables[i]->dim()));
    }
    const int64_t bad = FirstNonFinite(gradients[i]);
    if (bad >= 0) {
      nonfinite_rejected_.fetch_add(1, std::memory_order_relaxed);
      return absl::InvalidArgumentError(absl::StrCat(
          "push to embedding table '", tables[i]->name(), "' from worker ",
          worker, ": gradient value ", gradients[i][bad], " of id ",
          ids[i][bad / tables[i]->dim()],
          " is not finite; the update was rejected and the table is "
          "untouched (lower the learning rate or check the loss)"));
    }
  }
  PushRowsResponse response;
  for (size_t i = 0; i < tables.size(); ++i) {
    PushPartResult* result = response.add_results();
    absl::StatusOr<std::pair<PushOutcome, int64_t>> pushed =
        tables[i]->Push(ids[i], gradients[i], version, worker);
    if (!pushed.ok()) {
      if (pushed.status().code() == absl::StatusCode::kAborted) {
        stale_dropped_.fetch_add(1, std::memory_order_relaxed);
      }
      result->set_code(static_cast<int>(pushed.status().code()));
      result->set_message(std::string(pushed.status().message()));
      result->set_version(tables[i]->Version());
      continue;
    }
    if (pushed->first == PushOutcome::kApplied) {
      updates_applied_.fetch_add(1, std::memory_order_relaxed);
    }
    if (pushed->first != PushOutcome::kDuplicate) {
      // As for a dense chunk (ApplyChecked): the table's updates since the
      // version the rows were pulled at, before this one. A worker that
      // prefetches its next batch's rows pushes them one update staler.
      const int64_t before = pushed->first == PushOutcome::kApplied
                                 ? pushed->second - 1
                                 : pushed->second;
      staleness_.Record(before - std::clamp<int64_t>(version, 0, before));
    }
    result->set_version(pushed->second);
  }
  pushes_.fetch_add(1, std::memory_order_relaxed);
  return response;
}

absl::StatusOr<std::vector<EmbeddingTable*>> ParameterServerCore::ListTables()
    const {
  ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckConfiguredLocked());
  std::vector<EmbeddingTable*> list;
  for (const auto& [name, entry] : tables_) list.push_back(entry.table.get());
  return list;
}

}  // namespace psflow
