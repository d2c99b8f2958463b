// The parameter server's logic, free of any transport: configuration,
// variables, pulls, pushes (async and sync) and counters. The gRPC server
// (grpc_ps_server.h) and the in-process client both drive this class, so
// one conformance suite covers both paths.
//
// Lifecycle: Configure once (optimizer, schedule, mode), then
// CreateVariables, then any mix of Assign/Pull/Push. Variables are never
// removed, so a ChunkRef stays valid for the core's lifetime.
//
// Thread-safe: any number of threads may call any method.
#ifndef PSFLOW_PS_PS_CORE_H_
#define PSFLOW_PS_PS_CORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/metrics/metrics_registry.h"
#include "common/mutex.h"
#include "proto/protocol.h"
#include "proto/ps.pb.h"
#include "ps/apply_pool.h"
#include "ps/embedding_table.h"
#include "ps/gradient.h"
#include "ps/lr_schedule.h"
#include "ps/optimizer.h"
#include "ps/staleness_histogram.h"
#include "ps/variable.h"
#include "ps/worker_clocks.h"

namespace psflow {

// One chunk of one variable: the target of a bulk request.
struct ChunkRef {
  Variable* variable = nullptr;
  int chunk = 0;
  int64_t offset_elements = 0;  // where the chunk starts in the variable
  int64_t num_elements = 0;
};

// A chunk's values in place, for sending without a copy.
struct PullView {
  PullResponse response;
  absl::Span<const float> values;  // valid for the core's lifetime
};

// At most this many variables, and embedding tables, on one server.
inline constexpr int64_t kMaxVariablesPerServer = 100000;
inline constexpr int64_t kMaxTablesPerServer = 1024;

class ParameterServerCore {
 public:
  struct Options {
    // Size of the unit of locking, versioning and transfer. 1-4 MB keeps
    // several RPCs in flight per PS for large tensors.
    int64_t chunk_bytes = 4 << 20;
    // Optional (metrics): observes how long each push batch takes to check
    // and apply, in seconds. Must outlive the core.
    HistogramCell* apply_seconds = nullptr;
    // At most this many bytes of variables (values and optimizer slots);
    // CreateVariables beyond it is RESOURCE_EXHAUSTED before anything is
    // allocated. 0: no limit (ps_server defaults it to half the memory).
    int64_t max_variable_bytes = 0;
    // Threads a push's optimizer apply is spread over (ps/apply_pool.h):
    // the pushing thread and apply_threads - 1 pool threads. 1 applies on
    // the pushing thread alone (ps_server defaults it to the host's cores).
    // The result is the same for any value.
    int apply_threads = 1;
  };

  explicit ParameterServerCore(Options options);
  ParameterServerCore(const ParameterServerCore&) = delete;
  ParameterServerCore& operator=(const ParameterServerCore&) = delete;

  // Sets the update rule. Idempotent for an identical request;
  // FailedPrecondition for a different one.
  absl::StatusOr<ConfigureResponse> Configure(const ConfigureRequest& request);

  // Creates zero-filled variables, each updated by the optimizer or as a
  // moving average (VariableSpec.update). FailedPrecondition before
  // Configure or when a name exists with another shape, update or momentum;
  // InvalidArgument for bad specs (an unknown update, a momentum outside
  // [0, 1)); ResourceExhausted, naming the sizes, beyond max_variable_bytes.
  absl::Status CreateVariables(const CreateVariablesRequest& request);

  // Resolves a bulk request's target chunk: checks the protocol version,
  // that the server is configured, the variable exists (NotFound) and the
  // range is exactly one chunk (InvalidArgument).
  absl::StatusOr<ChunkRef> Resolve(uint32_t protocol_version,
                                   absl::string_view variable,
                                   int64_t offset_elements,
                                   int64_t num_elements) const;

  // InvalidArgument unless a PullBatch/PushBatch holds 1 to kMaxBatchParts
  // parts.
  static absl::Status CheckBatchSize(int parts);

  // InvalidArgument unless `worker_index` names one of the configured
  // workers (any index before Configure names how many: the push is then
  // refused as unconfigured anyway). Sync aggregation keys its
  // contributors by it, so an index from the network is bounded.
  absl::Status CheckWorkerIndex(int64_t worker_index) const;

  // Overwrites the chunk's values with `values` (num_elements of them).
  absl::Status Assign(const ChunkRef& ref, absl::Span<const float> values);

  // Copies the chunk into `out` (num_elements long) under the chunk's lock:
  // the values are exactly those of the returned version.
  PullResponse Pull(const ChunkRef& ref, absl::Span<float> out);

  // The chunk's values in place (no copy), for zero-copy sends. Pushes may
  // change them while they are read, so a reader racing a push to the same
  // chunk can see part of that update: the usual asynchronous-PS (Hogwild,
  // TensorFlow PS) semantics. Use Pull() when a consistent snapshot is
  // needed (checkpoints, evaluation).
  PullView View(const ChunkRef& ref);

  // Applies (async) or aggregates (sync) a gradient. InvalidArgument when it
  // holds NaN/Inf (counted; the variable is untouched), Aborted when it is
  // stale (sync; counted).
  absl::StatusOr<PushResponse> Push(const ChunkRef& ref,
                                    const PushRequest& request,
                                    absl::Span<const float> gradient);

  // Applies or aggregates several chunks' gradients (a PushBatch RPC): all
  // of them are checked first (sizes, NaN/Inf), and any failure rejects the
  // batch with nothing applied. Then each part's outcome, in order; in sync
  // mode a part may be Aborted (stale) while others are applied. Parts for
  // distinct chunks may apply in parallel on the apply threads; a batch
  // that names one chunk twice applies in order.
  //
  // `finite` says whether the caller already found every gradient value
  // finite (the bulk handler checks them where they lie, in the network's
  // buffers or the client's shared memory); then only the sizes are
  // checked here. A caller that
  // found a NaN/Inf passes kUnchecked, so that the rejection is counted and
  // worded here.
  enum class Finite { kUnchecked, kChecked };
  absl::StatusOr<PushBatchResponse> PushBatch(
      absl::Span<const ChunkRef> refs, int64_t version, int worker,
      absl::Span<const absl::Span<const float>> gradients,
      Finite finite = Finite::kUnchecked);
  // Same, with gradients that may be read block by block where they lie
  // (a TCP push's receive buffers, ps/gradient.h): an unchecked one is then
  // read twice, once for the check and once for the update, and never
  // copied whole.
  absl::StatusOr<PushBatchResponse> PushBatch(
      absl::Span<const ChunkRef> refs, int64_t version, int worker,
      absl::Span<const Gradient> gradients, Finite finite);

  StatsResponse Stats() const;

  // ---- Embedding tables (ps_core_tables.cc) ----

  // The tables a PullRows/PushRows names, one per part: checks the
  // protocol version, that the server is configured, every table exists
  // (NotFound), the ids number 1 to kMaxRowsPerRequest in all and the
  // ids with their rows fit in one bulk message (InvalidArgument).
  absl::StatusOr<std::vector<EmbeddingTable*>> ResolveRows(
      uint32_t protocol_version,
      const google::protobuf::RepeatedPtrField<RowsPart>& parts) const;

  // Reads every part's rows (out[i]: ids[i].size() x dim of tables[i]).
  absl::StatusOr<PullRowsResponse> PullRows(
      absl::Span<EmbeddingTable* const> tables,
      absl::Span<const absl::Span<const int64_t>> ids, bool train,
      absl::Span<const absl::Span<float>> out);

  // Checks every part's gradients (sizes, NaN/Inf: InvalidArgument,
  // nothing applied), then pushes each part (see EmbeddingTable::Push);
  // per-part outcomes, a stale SYNC part Aborted alone.
  absl::StatusOr<PushRowsResponse> PushRows(
      absl::Span<EmbeddingTable* const> tables,
      absl::Span<const absl::Span<const int64_t>> ids,
      absl::Span<const absl::Span<const float>> gradients, int64_t version,
      int worker);

  // Every table, by name. FailedPrecondition before Configure.
  absl::StatusOr<std::vector<EmbeddingTable*>> ListTables() const;

  // SYNC checkpoints: bounds updates (see HoldRequest). FailedPrecondition
  // in async mode or before Configure; InvalidArgument for HOLD_AT below a
  // chunk's version.
  absl::StatusOr<HoldResponse> Hold(const HoldRequest& request);

  // Every variable, by name (for saving and restoring the shard).
  // FailedPrecondition before Configure.
  absl::StatusOr<std::vector<Variable*>> ListVariables() const;

  // Whether updates are synchronous (after Configure).
  bool sync() const;

  // The configured mode and job name (UPDATE_MODE_UNSPECIFIED and "" before
  // Configure).
  UpdateMode mode() const;
  std::string job_name() const;
  // The whole configuration (nullopt before Configure).
  std::optional<ConfigureRequest> configuration() const;

  // BOUNDED mode's worker clocks (null in other modes or before
  // Configure). Lives as long as the core.
  WorkerClocks* worker_clocks() const;

  // BOUNDED: replaces the workers that do not bound the others.
  // FailedPrecondition in other modes.
  absl::Status ExcludeWorkers(const ExcludeWorkersRequest& request);

  // Keeps a restore that was read and checked but not applied yet
  // (RestoreShard PREPARE; opaque here, see shard_checkpoint.cc), replacing
  // any earlier one; Take returns and forgets it (null when none).
  void StashRestore(std::shared_ptr<void> staged);
  std::shared_ptr<void> TakeStashedRestore();

  // Elements per chunk (constant).
  int64_t chunk_elements() const { return chunk_elements_; }
  // Elements of the dense variables this server holds (0 before any).
  int64_t dense_elements() const;

  // Counts bytes moved by the transport, for Stats.
  void CountBytes(int64_t received, int64_t sent);

 private:
  absl::Status CheckConfiguredLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Checks the new tables of a CreateVariables request against the
  // existing variables and tables; creates them when `create`.
  absl::Status CreateTablesLocked(const CreateVariablesRequest& request,
                                  bool create)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A push's size and NaN/Inf check (rejections are counted).
  // InvalidArgument unless `gradient` holds exactly the chunk's elements.
  static absl::Status CheckGradientSize(const ChunkRef& ref,
                                        const Gradient& gradient);
  absl::Status CheckGradient(const ChunkRef& ref, int worker,
                             const Gradient& gradient);
  // Applies (async) or aggregates (sync) a checked gradient.
  absl::StatusOr<PushResponse> ApplyChecked(const ChunkRef& ref,
                                            int64_t version, int worker,
                                            const Gradient& gradient);

  const int64_t chunk_elements_;
  HistogramCell* const apply_seconds_;
  const int64_t max_variable_bytes_;
  // Null when apply_threads is 1.
  const std::unique_ptr<ApplyPool> apply_pool_;

  mutable Mutex mu_;
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  ConfigureRequest configuration_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<LrSchedule> schedule_ ABSL_GUARDED_BY(mu_);
  UpdateRule rule_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Variable>, std::less<>> variables_
      ABSL_GUARDED_BY(mu_);
  // An embedding table with the spec it was created from and, when the
  // spec names one, its own optimizer.
  struct Table {
    EmbeddingTableSpec spec;
    // The table's own optimizer and schedule; null: the server's.
    std::unique_ptr<Optimizer> optimizer;
    std::unique_ptr<LrSchedule> schedule;
    std::unique_ptr<EmbeddingTable> table;
  };
  std::map<std::string, Table, std::less<>> tables_ ABSL_GUARDED_BY(mu_);
  // Bytes of rows every table holds, against max_variable_bytes less the
  // dense variables' bytes.
  std::atomic<int64_t> table_bytes_{0};
  // Configure's num_workers (0 before Configure).
  std::atomic<int64_t> num_workers_{0};
  int64_t total_elements_ ABSL_GUARDED_BY(mu_) = 0;
  // Values and optimizer slots (moving averages have none), for
  // max_variable_bytes.
  int64_t allocated_floats_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<void> stashed_restore_ ABSL_GUARDED_BY(mu_);
  // Set once, by Configure (BOUNDED).
  std::unique_ptr<WorkerClocks> worker_clocks_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> pulls_{0};
  std::atomic<int64_t> pushes_{0};
  std::atomic<int64_t> updates_applied_{0};
  std::atomic<int64_t> stale_dropped_{0};
  std::atomic<int64_t> nonfinite_rejected_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> bytes_sent_{0};
  StalenessHistogram staleness_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_CORE_H_
