#include "ps/ps_core.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/float_mode.h"
#include "common/job/update_rule.h"
#include "common/path_name.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/ps_core_checks.h"

namespace psflow {
namespace {

// A single variable larger than this is a client bug, not a model.
constexpr int64_t kMaxElements = int64_t{1} << 36;

std::string ShapeString(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The spec's update rule; InvalidArgument, naming the variable and the
// value, for an unknown rule or a momentum outside [0, 1) (or set without a
// moving average).
absl::StatusOr<VariableUpdate> CheckUpdate(const VariableSpec& spec) {
  switch (spec.update()) {
    case VariableSpec::OPTIMIZER:
      if (spec.momentum() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", spec.name(), "\" has momentum ", spec.momentum(),
            " but update OPTIMIZER; momentum applies to MOVING_AVERAGE "
            "only (the optimizer's own momentum is in Configure)"));
      }
      return VariableUpdate::kOptimizer;
    case VariableSpec::MOVING_AVERAGE:
      // Also false for NaN.
      if (!(spec.momentum() >= 0.0f && spec.momentum() < 1.0f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", spec.name(), "\" is a moving average with momentum ",
            spec.momentum(), "; use a value in [0, 1) (e.g. 0.99)"));
      }
      return VariableUpdate::kMovingAverage;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", spec.name(), "\" has update rule ", spec.update(),
          "; use OPTIMIZER (0) or MOVING_AVERAGE (1) (is the client a newer "
          "psflow release?)"));
  }
}

std::string DescribeUpdate(VariableUpdate update, float momentum) {
  return update == VariableUpdate::kOptimizer
             ? std::string("the optimizer")
             : absl::StrCat("a moving average with momentum ", momentum);
}

// Whether no two parts of a batch name the same chunk.
bool DistinctChunks(absl::Span<const ChunkRef> refs) {
  absl::flat_hash_set<std::pair<const Variable*, int>> chunks;
  chunks.reserve(refs.size());
  for (const ChunkRef& ref : refs) {
    if (!chunks.emplace(ref.variable, ref.chunk).second) return false;
  }
  return true;
}

}  // namespace

absl::Status CheckProtocol(uint32_t version) {
  if (version == kProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "protocol version ", version,
      " from the client, but this parameter "
      "server speaks version ",
      kProtocolVersion, "; run the same psflow release on every task"));
}

ParameterServerCore::ParameterServerCore(Options options)
    : chunk_elements_(std::max<int64_t>(
          1, options.chunk_bytes / static_cast<int64_t>(sizeof(float)))),
      apply_seconds_(options.apply_seconds),
      max_variable_bytes_(options.max_variable_bytes),
      apply_pool_(options.apply_threads > 1
                      ? std::make_unique<ApplyPool>(
                            ApplyPool::Options{options.apply_threads})
                      : nullptr) {}

absl::StatusOr<ConfigureResponse> ParameterServerCore::Configure(
    const ConfigureRequest& request) {
  RETURN_IF_ERROR(CheckProtocol(request.protocol_version()));
  if (!request.job_name().empty()) {
    // It becomes folders: <log_dir>/<job name>/ps-<index>/.
    RETURN_IF_ERROR(CheckPathName(request.job_name(), "the job name"));
  }
  if (!request.run_group().empty()) {
    RETURN_IF_ERROR(CheckPathName(request.run_group(), "the run group"));
  }
  if (request.log_dir().size() > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("log_dir is ", request.log_dir().size(),
                     " bytes long; a path is at most 4096"));
  }
  ConfigureResponse response;
  response.set_chunk_elements(chunk_elements_);
  MutexLock lock(&mu_);
  if (configured_) {
    if (google::protobuf::util::MessageDifferencer::Equals(configuration_,
                                                           request)) {
      return response;
    }
    return absl::FailedPreconditionError(
        "this parameter server was already configured differently "
        "(optimizer, schedule or mode); restart it to run another job");
  }
  ASSIGN_OR_RETURN(OptimizerParams params,
                   OptimizerParamsFromProto(request.optimizer()));
  ASSIGN_OR_RETURN(auto optimizer, Optimizer::Create(params));
  ASSIGN_OR_RETURN(LrScheduleConfig schedule_config,
                   LrScheduleFromProto(request.learning_rate()));
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(schedule_config));
  UpdateRule rule;
  rule.staleness_aware = request.staleness_aware_learning_rate();
  switch (request.mode()) {
    case ASYNC:
      break;
    case SYNC:
      if (request.num_workers() < 1 || request.num_workers() > kMaxWorkers) {
        return absl::InvalidArgumentError(absl::StrCat(
            "num_workers is ", request.num_workers(),
            "; sync mode needs the number of workers (1..", kMaxWorkers, ")"));
      }
      if (request.replicas_to_aggregate() < 1 ||
          request.replicas_to_aggregate() > request.num_workers()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replicas_to_aggregate is ", request.replicas_to_aggregate(),
            " with ", request.num_workers(), " workers; use 1..",
            request.num_workers(),
            " (fewer than the workers makes the rest "
            "backups)"));
      }
      if (request.staleness_aware_learning_rate()) {
        return absl::InvalidArgumentError(
            "staleness_aware_learning_rate applies to ASYNC only: SYNC "
            "gradients are never stale");
      }
      rule.sync = true;
      rule.replicas_to_aggregate = request.replicas_to_aggregate();
      break;
    case BOUNDED:
      if (request.num_workers() < 1 || request.num_workers() > kMaxWorkers) {
        return absl::InvalidArgumentError(
            absl::StrCat("num_workers is ", request.num_workers(),
                         "; bounded mode needs the number of workers (1..",
                         kMaxWorkers, ")"));
      }
      if (request.max_staleness() < 0 ||
          request.max_staleness() > kMaxStalenessBound) {
        return absl::InvalidArgumentError(absl::StrCat(
            "max_staleness is ", request.max_staleness(), "; use 0..",
            kMaxStalenessBound,
            " (0 is sync without aggregation; large values approach async)"));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("mode is ", UpdateMode_Name(request.mode()),
                       "; use ASYNC, SYNC or BOUNDED"));
  }
  if (request.mode() == BOUNDED) {
    worker_clocks_ = std::make_unique<WorkerClocks>(request.num_workers(),
                                                    request.max_staleness());
  }
  optimizer_ = std::move(optimizer);
  schedule_ = std::make_unique<LrSchedule>(schedule);
  rule.optimizer = optimizer_.get();
  rule.schedule = schedule_.get();
  rule.pool = apply_pool_.get();
  rule_ = rule;
  configuration_ = request;
  // Unknown fields would be kept, and copied with every configuration().
  configuration_.DiscardUnknownFields();
  configured_ = true;
  num_workers_ = request.num_workers();
  return response;
}

absl::Status ParameterServerCore::CheckWorkerIndex(int64_t worker_index) const {
  const int64_t workers = num_workers_.load();
  if (worker_index < 0 || (workers > 0 && worker_index >= workers) ||
      worker_index >= kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_index ", worker_index,
                     " names no worker of this job (", workers, " workers)"));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerCore::CheckConfiguredLocked() const {
  if (configured_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this parameter server is not configured yet; the chief sends "
      "Configure (optimizer, mode) before creating variables");
}

absl::Status ParameterServerCore::CreateVariables(
    const CreateVariablesRequest& request) {
  RETURN_IF_ERROR(CheckProtocol(request.protocol_version()));
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckConfiguredLocked());
  // Validate everything first so that a bad request creates nothing.
  struct Checked {
    int64_t elements = 1;
    VariableUpdate update = VariableUpdate::kOptimizer;
    float momentum = 0;
  };
  // Every variable and table has a fixed cost beyond its values (its
  // chunks' state; a table's 64 stripes), which the byte budget does not
  // see: their numbers are bounded instead.
  if (static_cast<int64_t>(variables_.size()) + request.variables_size() >
      kMaxVariablesPerServer) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this parameter server holds ", variables_.size(),
        " variables and the request adds ", request.variables_size(),
        "; at most ", kMaxVariablesPerServer,
        " are kept by one server: add parameter servers or merge variables"));
  }
  if (static_cast<int64_t>(tables_.size()) + request.tables_size() >
      kMaxTablesPerServer) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this parameter server holds ", tables_.size(),
        " embedding tables and the request adds ", request.tables_size(),
        "; at most ", kMaxTablesPerServer, " are kept by one server"));
  }
  std::map<std::string, Checked> checked;
  for (const VariableSpec& spec : request.variables()) {
    if (spec.name().empty() || spec.name().size() > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable name \"", spec.name().substr(0, 64),
                       "\" is empty or longer than 1024 bytes"));
    }
    Checked c;
    for (int64_t dim : spec.shape()) {
      if (dim <= 0 || c.elements > kMaxElements / dim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", spec.name(), "\" has shape ",
            ShapeString(spec.shape()),
            "; every dimension must be positive and the total at most 2^36 "
            "elements"));
      }
      c.elements *= dim;
    }
    ASSIGN_OR_RETURN(c.update, CheckUpdate(spec));
    c.momentum = spec.momentum();
    auto it = variables_.find(spec.name());
    if (it != variables_.end()) {
      const Variable& existing = *it->second;
      const auto& shape = existing.shape();
      if (!std::equal(shape.begin(), shape.end(), spec.shape().begin(),
                      spec.shape().end())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "variable \"", spec.name(), "\" exists with shape [",
            absl::StrJoin(shape, ", "), "], not ", ShapeString(spec.shape()),
            "; use another name or restart the parameter servers"));
      }
      if (existing.update() != c.update || existing.momentum() != c.momentum) {
        return absl::FailedPreconditionError(absl::StrCat(
            "variable \"", spec.name(), "\" exists updated by ",
            DescribeUpdate(existing.update(), existing.momentum()), ", not ",
            DescribeUpdate(c.update, c.momentum),
            "; use another name or restart the parameter servers"));
      }
    }
    if (!checked.emplace(spec.name(), c).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", spec.name(), "\" is listed twice in one request"));
    }
    if (tables_.count(spec.name()) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "\"", spec.name(),
          "\" exists as an embedding table; give the variable another name"));
    }
  }
  RETURN_IF_ERROR(CreateTablesLocked(request, /*create=*/false));
  // What the new variables hold, values and (trainable ones) every
  // optimizer slot, checked against the limit before anything is
  // allocated. Each term is at most 2^36 elements * 4 bytes * (1 + slots),
  // so the sums cannot overflow.
  const int64_t slots =
      static_cast<int64_t>(rule_.optimizer->slot_names().size());
  int64_t new_elements = 0, new_floats = 0;
  for (const auto& [name, c] : checked) {
    if (variables_.count(name) > 0) continue;
    new_elements += c.elements;
    new_floats +=
        c.elements * (1 + (c.update == VariableUpdate::kOptimizer ? slots : 0));
  }
  const int64_t held = allocated_floats_ * int64_t{sizeof(float)};
  const int64_t wanted = new_floats * int64_t{sizeof(float)};
  if (max_variable_bytes_ > 0 && wanted > max_variable_bytes_ - held) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "creating these variables needs ", wanted, " bytes (", new_elements,
        " floats of values and ", new_floats - new_elements,
        " of optimizer slots) on this parameter server, which holds ", held,
        " of at most ", max_variable_bytes_,
        " bytes (--max_variable_bytes; default half the machine's memory); "
        "add parameter servers or raise the limit"));
  }
  for (const VariableSpec& spec : request.variables()) {
    if (variables_.count(spec.name()) > 0) continue;
    const Checked& c = checked[spec.name()];
    auto variable = std::make_unique<Variable>(
        spec.name(),
        std::vector<int64_t>(spec.shape().begin(), spec.shape().end()),
        c.elements, chunk_elements_, rule_, c.update, c.momentum);
    allocated_floats_ +=
        c.elements * (1 + static_cast<int64_t>(variable->slot_names().size()));
    total_elements_ += c.elements;
    variables_.emplace(spec.name(), std::move(variable));
  }
  return CreateTablesLocked(request, /*create=*/true);
}

absl::StatusOr<ChunkRef> ParameterServerCore::Resolve(
    uint32_t protocol_version, absl::string_view variable,
    int64_t offset_elements, int64_t num_elements) const {
  RETURN_IF_ERROR(CheckProtocol(protocol_version));
  ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckConfiguredLocked());
  auto it = variables_.find(variable);
  if (it == variables_.end()) {
    return absl::NotFoundError(
        absl::StrCat("variable \"", variable,
                     "\" is not on this parameter server (it "
                     "holds ",
                     variables_.size(),
                     " variables); the chief creates "
                     "variables at start: check the placement"));
  }
  Variable* var = it->second.get();
  ASSIGN_OR_RETURN(int chunk, var->ChunkFor(offset_elements, num_elements));
  return ChunkRef{var, chunk, offset_elements, num_elements};
}

absl::Status ParameterServerCore::CheckBatchSize(int parts) {
  if (parts < 1 || parts > kMaxBatchParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch holds 1 to ", kMaxBatchParts,
                     " parts; this one holds ", parts));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerCore::Assign(const ChunkRef& ref,
                                         absl::Span<const float> values) {
  if (static_cast<int64_t>(values.size()) != ref.num_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "assign to \"", ref.variable->name(), "\": ", values.size(),
        " values for a chunk of ", ref.num_elements));
  }
  const int64_t bad = FirstNonFinite(values);
  if (bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "assign to \"", ref.variable->name(), "\": value ", values[bad],
        " at element ", bad, " of the chunk is not finite"));
  }
  ref.variable->Write(ref.chunk, values);
  return absl::OkStatus();
}

PullView ParameterServerCore::View(const ChunkRef& ref) {
  pulls_.fetch_add(1, std::memory_order_relaxed);
  PullView view;
  view.values = ref.variable->Values(ref.chunk);
  view.response.set_version(ref.variable->Version(ref.chunk));
  return view;
}

PullResponse ParameterServerCore::Pull(const ChunkRef& ref,
                                       absl::Span<float> out) {
  pulls_.fetch_add(1, std::memory_order_relaxed);
  PullResponse response;
  response.set_version(ref.variable->Read(ref.chunk, out));
  return response;
}

absl::Status ParameterServerCore::CheckGradientSize(const ChunkRef& ref,
                                                    const Gradient& gradient) {
  if (static_cast<int64_t>(gradient.size()) != ref.num_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push to \"", ref.variable->name(), "\": ", gradient.size(),
        " gradient values for a chunk of ", ref.num_elements));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerCore::CheckGradient(const ChunkRef& ref, int worker,
                                                const Gradient& gradient) {
  RETURN_IF_ERROR(CheckGradientSize(ref, gradient));
  int64_t bad = -1;
  float bad_value = 0;
  gradient.ForEachBlock(0, gradient.size(),
                        [&](int64_t at, absl::Span<const float> block) {
                          if (bad >= 0) return;
                          const int64_t i = FirstNonFinite(block);
                          if (i >= 0) {
                            bad = at + i;
                            bad_value = block[i];
                          }
                        });
  if (bad >= 0) {
    nonfinite_rejected_.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat(
        "push to \"", ref.variable->name(), "\" from worker ", worker,
        ": gradient value ", bad_value, " at element ",
        ref.offset_elements + bad,
        " is not finite; the update was rejected and the variable is "
        "untouched (lower the learning rate or check the loss)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushResponse> ParameterServerCore::ApplyChecked(
    const ChunkRef& ref, int64_t version, int worker,
    const Gradient& gradient) {
  // The optimizer runs on this (gRPC or shared-memory) thread: subnormal
  // slots must not slow it 14x (common/float_mode.h).
  EnableFlushToZero();
  absl::StatusOr<std::pair<PushOutcome, int64_t>> outcome =
      ref.variable->Push(ref.chunk, gradient, version, worker);
  if (!outcome.ok()) {
    if (absl::IsAborted(outcome.status())) {
      stale_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    return outcome.status();
  }
  if (outcome->first == PushOutcome::kApplied) {
    updates_applied_.fetch_add(1, std::memory_order_relaxed);
  }
  if (outcome->first != PushOutcome::kDuplicate) {
    // Updates the chunk received since `version`, before this one: the
    // version after an applied push is one past the one it was applied to
    // (sync only accepts version == the chunk's, so its staleness is 0).
    const int64_t before = outcome->first == PushOutcome::kApplied
                               ? outcome->second - 1
                               : outcome->second;
    // `version` comes from the client: clamped, so no value overflows.
    staleness_.Record(before - std::clamp<int64_t>(version, 0, before));
  }
  PushResponse response;
  response.set_version(outcome->second);
  return response;
}

absl::StatusOr<PushResponse> ParameterServerCore::Push(
    const ChunkRef& ref, const PushRequest& request,
    absl::Span<const float> gradient) {
  pushes_.fetch_add(1, std::memory_order_relaxed);
  RETURN_IF_ERROR(CheckGradient(ref, request.worker_index(), gradient));
  return ApplyChecked(ref, request.version(), request.worker_index(), gradient);
}

absl::StatusOr<PushBatchResponse> ParameterServerCore::PushBatch(
    absl::Span<const ChunkRef> refs, int64_t version, int worker,
    absl::Span<const absl::Span<const float>> gradients, Finite finite) {
  const std::vector<Gradient> views(gradients.begin(), gradients.end());
  return PushBatch(refs, version, worker, views, finite);
}

absl::StatusOr<PushBatchResponse> ParameterServerCore::PushBatch(
    absl::Span<const ChunkRef> refs, int64_t version, int worker,
    absl::Span<const Gradient> gradients, Finite finite) {
  pushes_.fetch_add(static_cast<int64_t>(refs.size()),
                    std::memory_order_relaxed);
  if (refs.size() != gradients.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push batch of ", refs.size(), " chunks carries ",
                     gradients.size(), " gradients"));
  }
  const absl::Time start =
      apply_seconds_ != nullptr ? absl::Now() : absl::InfinitePast();
  // Every part is checked before any is applied: one bad part rejects the
  // whole batch and leaves every variable untouched.
  for (size_t i = 0; i < refs.size(); ++i) {
    RETURN_IF_ERROR(finite == Finite::kChecked
                        ? CheckGradientSize(refs[i], gradients[i])
                        : CheckGradient(refs[i], worker, gradients[i]));
  }
  std::vector<absl::StatusOr<PushResponse>> results(refs.size());
  auto apply = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      results[i] = ApplyChecked(refs[i], version, worker, gradients[i]);
    }
  };
  if (apply_pool_ != nullptr && refs.size() > 1 && DistinctChunks(refs)) {
    // Each chunk is applied whole by one thread, the chunks in parallel:
    // the outcome of each is what it would be in order.
    std::vector<int64_t> work;
    work.reserve(refs.size());
    for (const ChunkRef& ref : refs) {
      work.push_back(static_cast<int64_t>(
          static_cast<double>(ref.num_elements) * ref.variable->apply_cost()));
    }
    apply_pool_->ForEachGroup(work, apply);
  } else {
    apply(0, refs.size());
  }
  PushBatchResponse response;
  for (const absl::StatusOr<PushResponse>& result : results) {
    PushPartResult* part = response.add_results();
    if (result.ok()) {
      part->set_version(result->version());
    } else {
      part->set_code(static_cast<int>(result.status().code()));
      part->set_message(std::string(result.status().message()));
    }
  }
  if (apply_seconds_ != nullptr) {
    apply_seconds_->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  }
  return response;
}

StatsResponse ParameterServerCore::Stats() const {
  StatsResponse stats;
  {
    ReaderMutexLock lock(&mu_);
    stats.set_num_variables(static_cast<int64_t>(variables_.size()));
    stats.set_total_elements(total_elements_);
    stats.set_restore_pending(stashed_restore_ != nullptr);
  }
  stats.set_pulls(pulls_.load());
  stats.set_pushes(pushes_.load());
  stats.set_updates_applied(updates_applied_.load());
  stats.set_stale_gradients_dropped(stale_dropped_.load());
  stats.set_nonfinite_gradients_rejected(nonfinite_rejected_.load());
  staleness_.AddTo(stats);
  if (WorkerClocks* clocks = worker_clocks(); clocks != nullptr) {
    clocks->AddTo(stats);
  }
  stats.set_bytes_received(bytes_received_.load());
  stats.set_bytes_sent(bytes_sent_.load());
  absl::StatusOr<std::vector<EmbeddingTable*>> tables = ListTables();
  if (tables.ok()) {
    for (const EmbeddingTable* table : *tables) {
      const EmbeddingTableStats t = table->Stats();
      TableStats* out = stats.add_tables();
      out->set_name(table->name());
      out->set_dim(table->dim());
      out->set_rows(t.rows);
      out->set_bytes(t.bytes);
      out->set_version(t.version);
      out->set_rows_pulled(t.rows_pulled);
      out->set_rows_pushed(t.rows_pushed);
      out->set_admissions(t.admissions);
      out->set_evicted_by_age(t.evicted_by_age);
      out->set_evicted_by_capacity(t.evicted_by_capacity);
      out->set_unadmitted_lookups(t.unadmitted_lookups);
      out->set_unadmitted_gradients(t.unadmitted_gradients);
      out->set_stale_pushes_dropped(t.stale_pushes_dropped);
    }
  }
  return stats;
}

absl::StatusOr<std::vector<Variable*>> ParameterServerCore::ListVariables()
    const {
  ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckConfiguredLocked());
  std::vector<Variable*> list;
  for (const auto& [name, variable] : variables_)
    list.push_back(variable.get());
  return list;
}

void ParameterServerCore::StashRestore(std::shared_ptr<void> staged) {
  MutexLock lock(&mu_);
  stashed_restore_ = std::move(staged);
}

std::shared_ptr<void> ParameterServerCore::TakeStashedRestore() {
  MutexLock lock(&mu_);
  return std::move(stashed_restore_);
}

WorkerClocks* ParameterServerCore::worker_clocks() const {
  ReaderMutexLock lock(&mu_);
  return worker_clocks_.get();
}

absl::Status ParameterServerCore::ExcludeWorkers(
    const ExcludeWorkersRequest& request) {
  RETURN_IF_ERROR(CheckProtocol(request.protocol_version()));
  WorkerClocks* clocks = worker_clocks();
  if (clocks == nullptr) {
    return absl::FailedPreconditionError(
        "ExcludeWorkers is for BOUNDED mode; this parameter server is not "
        "configured for it");
  }
  return clocks->Exclude(request.workers());
}

UpdateMode ParameterServerCore::mode() const {
  ReaderMutexLock lock(&mu_);
  return configured_ ? configuration_.mode() : UPDATE_MODE_UNSPECIFIED;
}

std::string ParameterServerCore::job_name() const {
  ReaderMutexLock lock(&mu_);
  return configuration_.job_name();
}

std::optional<ConfigureRequest> ParameterServerCore::configuration() const {
  ReaderMutexLock lock(&mu_);
  if (!configured_) return std::nullopt;
  return configuration_;
}

bool ParameterServerCore::sync() const {
  ReaderMutexLock lock(&mu_);
  return configured_ && rule_.sync;
}

absl::StatusOr<HoldResponse> ParameterServerCore::Hold(
    const HoldRequest& request) {
  RETURN_IF_ERROR(CheckProtocol(request.protocol_version()));
  if (!sync()) {
    return absl::FailedPreconditionError(
        "Hold is for sync mode; an async parameter server saves each chunk "
        "as it is");
  }
  ASSIGN_OR_RETURN(std::vector<Variable*> variables, ListVariables());
  ASSIGN_OR_RETURN(std::vector<EmbeddingTable*> tables, ListTables());
  // A table is held like a chunk: its version counts the same steps.
  auto range = [&variables, &tables] {
    HoldResponse response;
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (Variable* v : variables) {
      for (int c = 0; c < v->num_chunks(); ++c) {
        const int64_t version = v->Version(c);
        lo = std::min(lo, version);
        hi = std::max(hi, version);
      }
    }
    for (EmbeddingTable* t : tables) {
      lo = std::min(lo, t->Version());
      hi = std::max(hi, t->Version());
    }
    response.set_min_version(variables.empty() && tables.empty() ? 0 : lo);
    response.set_max_version(hi);
    return response;
  };
  int64_t limit = Variable::kNoHold;
  switch (request.action()) {
    case HoldRequest::FREEZE:
      // Chunks advance one at a time, so a chunk may pass the maximum read
      // here before its own bound is set; the maximum after setting it
      // still bounds every chunk, and HOLD_AT then raises the bound.
      limit = range().max_version();
      break;
    case HoldRequest::HOLD_AT:
      limit = request.step();
      break;
    case HoldRequest::RELEASE:
      break;
    default:
      return absl::InvalidArgumentError(
          "HoldRequest.action must be FREEZE, HOLD_AT or RELEASE");
  }
  if (request.action() == HoldRequest::FREEZE) {
    // A racing update may have taken a chunk to limit + 1 before its bound
    // was set: bound every chunk at the highest version seen afterwards.
    for (Variable* v : variables) {
      for (int c = 0; c < v->num_chunks(); ++c) v->SetHoldLimit(c, limit + 1);
    }
    for (EmbeddingTable* t : tables) t->SetHoldLimit(limit + 1);
    limit = range().max_version();
  }
  for (Variable* v : variables) {
    for (int c = 0; c < v->num_chunks(); ++c) v->SetHoldLimit(c, limit);
  }
  for (EmbeddingTable* t : tables) t->SetHoldLimit(limit);
  HoldResponse response = range();
  if (request.action() == HoldRequest::HOLD_AT &&
      response.max_version() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("HOLD_AT step ", limit, " but a chunk is already at step ",
                     response.max_version(), "; hold at a later step"));
  }
  return response;
}

void ParameterServerCore::CountBytes(int64_t received, int64_t sent) {
  bytes_received_.fetch_add(received, std::memory_order_relaxed);
  bytes_sent_.fetch_add(sent, std::memory_order_relaxed);
}

int64_t ParameterServerCore::dense_elements() const {
  MutexLock lock(&mu_);
  return total_elements_;
}

}  // namespace psflow
