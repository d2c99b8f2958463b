// ParameterClient: what workers, the chief and the evaluator use to reach
// the parameter servers.
//
// Callers name logical variables; the client scatters and gathers their
// parts over the servers as the placement says, in chunks of the servers'
// chunk size, all in flight at once. Calls are asynchronous and return a
// handle to Wait() on, in the shape of ps-lite's KVWorker:
//
//   auto pull = client.Pull({{"dense/kernel", kernel}, {"dense/bias", bias}});
//   ... compute something else ...
//   RETURN_IF_ERROR(pull->Wait());
//
// Buffers given to Pull/Push/Assign must stay valid and (for pushes and
// assigns) unchanged until Wait() returns or the handle is dropped (which
// waits too); they are never copied on send.
// Every RPC carries a deadline (Options::rpc_timeout).
//
// Thread-safe; handles may be waited on from any thread.
#ifndef PSFLOW_CLIENT_PS_CLIENT_H_
#define PSFLOW_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "checkpoint/shard_set.h"
#include "client/ps_shard.h"
#include "common/job/placement.h"

namespace psflow {

// A pending Pull, Push or Assign.
//
// Dropping the last reference to a handle waits for its calls as Wait()
// does. The buffers a call writes (pulls) or reads (pushes, assigns) are
// the caller's, so a call must never outlive the handle that names them:
// an early return that skipped a Wait() once left a transport thread
// writing a prefetched pull into a freed buffer (a diverging job's
// workers died of heap corruption). Waiting is bounded by the calls'
// deadline (Options::rpc_timeout), and sooner where the transport cancels
// them (PsShard::CancelInFlight).
class PsHandle {
 public:
  ~PsHandle();
  PsHandle(const PsHandle&) = delete;
  PsHandle& operator=(const PsHandle&) = delete;

  // Blocks until every RPC finished and the transport released every send
  // buffer. Returns the first error, naming the variable and the server.
  absl::Status Wait();

  // After Wait(): the lowest chunk version seen (pulls and pushes), i.e.
  // the global step the values belong to. -1 if none was reported.
  int64_t min_version() const;

  // After Wait(), for PullForStep: the highest worker clock a server
  // answered (after a join, the step the worker goes on from); else -1.
  int64_t worker_clock() const;

  // Opaque; defined in ps_client.cc.
  struct State;

 private:
  friend class ParameterClient;
  explicit PsHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// A pending PullRows or PushRows (ParameterClient::StartPullRows,
// StartPushRows), in the shape of PsHandle.
//
// A rows pull's servers answer into buffers the handle owns; the rows
// reach the caller's `TableRows::rows` only inside Wait(), on the waiting
// thread. So a pull dropped without a Wait() (a restart, an error) never
// writes the caller's memory, and a caller may reuse its buffers as soon
// as the handle is gone. A rows push sums its gradients into its own
// buffers when it starts: the caller's are free once StartPushRows
// returns. Dropping the last reference waits for the calls (bounded by
// Options::rpc_timeout, sooner after CancelInFlight).
class RowsHandle {
 public:
  ~RowsHandle();
  RowsHandle(const RowsHandle&) = delete;
  RowsHandle& operator=(const RowsHandle&) = delete;

  // Blocks until every server answered; a pull then copies its rows into
  // the caller's buffers (the first Wait() only: they must still be
  // valid). Returns the first error, naming the table and the server.
  absl::Status Wait();

  // After a successful Wait() of a pull: the lowest table version the
  // rows were read at (0 if no server was asked).
  int64_t version() const;

  // Opaque; defined in ps_client_rows.cc.
  struct State;

 private:
  friend class ParameterClient;
  explicit RowsHandle(std::shared_ptr<State> state)
      : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class ParameterClient : public ShardSet {
 public:
  struct Options {
    absl::Duration rpc_timeout = absl::Seconds(60);
  };

  // `shards[i]` is parameter server i of the placement.
  ParameterClient(std::vector<std::unique_ptr<PsShard>> shards,
                  Placement placement, const Options& options);

  // Sends the job's update rule to every server (idempotent, so every
  // role may call it) and learns the chunk size. Must precede the rest.
  // Bounded by Options::rpc_timeout, and by `deadline` when sooner (a
  // chief's startup deadline).
  absl::Status Configure(const ConfigureRequest& request,
                         absl::Time deadline = absl::InfiniteFuture());

  // Creates every variable part on its server, with its variable's update
  // rule (optimizer or moving average); the chief does this once.
  absl::Status CreateVariables();

  using Mutable = std::pair<std::string, absl::Span<float>>;
  using Const = std::pair<std::string, absl::Span<const float>>;

  // Reads variables into the buffers (each exactly the variable's size).
  // With min_version > 0 (sync mode), waits until that step is applied.
  // `consistent_snapshot` makes each chunk exactly one version (for
  // evaluation and checkpoints; costs a copy on the server).
  std::shared_ptr<PsHandle> Pull(const std::vector<Mutable>& variables,
                                 int64_t min_version = 0,
                                 bool consistent_snapshot = false);

  // BOUNDED mode: a worker's pull for its step clock.clock(), answered
  // once no live worker is more than max_staleness steps behind it
  // (bounded by Options::rpc_timeout); with clock.join(), the worker
  // (re)joins the bound (see WorkerClock in proto/ps.proto).
  std::shared_ptr<PsHandle> PullForStep(const std::vector<Mutable>& variables,
                                        const WorkerClock& clock);

  // Sends gradients. `version` is the global step the gradient was
  // computed at; `worker` the pushing worker's index; `worker_clock`
  // (BOUNDED) the worker's own step it belongs to.
  std::shared_ptr<PsHandle> Push(
      const std::vector<Const>& gradients, int64_t version = 0, int worker = 0,
      std::optional<int64_t> worker_clock = std::nullopt);

  // A push, and in the same calls the values after it was applied:
  // `values[i]` (the same variable as `gradients[i]`, the same size)
  // receives what a Pull started once this push was answered would read,
  // with one call per batch where Push and Pull take two. The handle's
  // min_version() is the pulled values' version. An error may come after
  // the push was applied (only the reads failed).
  std::shared_ptr<PsHandle> PushThenPull(const std::vector<Const>& gradients,
                                         const std::vector<Mutable>& values,
                                         int64_t version = 0, int worker = 0);

  // Host memory for a caller's long-lived tensors of `variables` (names, in
  // the order the caller pulls and pushes them) that those calls carry
  // without a copy where a server shares memory with this process
  // (PsShard::AllocateShared). Per server, one run holds the variables
  // placed wholly on it, in the given order, so that a batch of them is one
  // contiguous run. An entry is null where there is none (a variable split
  // over servers, a server on another host, a full region): use ordinary
  // memory for that one. Each buffer holds exactly its variable's elements.
  std::vector<std::shared_ptr<SharedBuffer>> AllocateShared(
      const std::vector<std::string>& variables);

  // Overwrites variable values (initialization, restore).
  std::shared_ptr<PsHandle> Assign(const std::vector<Const>& values);

  // Counters of every server, in server order (each call bounded by
  // `timeout`, default Options::rpc_timeout).
  absl::StatusOr<std::vector<StatsResponse>> Stats(
      std::optional<absl::Duration> timeout = std::nullopt);
  // The same, asked of every server at once, with each server's own
  // answer or error (a server that hangs does not fail the others).
  std::vector<absl::StatusOr<StatsResponse>> StatsOfEach(
      absl::Duration timeout);
  // Whether any server answers a Stats call within `timeout`: false means
  // every server is gone or unreachable. A cancelled call (the caller's
  // own cancellation) proves nothing, so it counts as an answer.
  bool AnyServerAnswers(absl::Duration timeout);

  // Checkpoint fan-outs: one request per server (requests[i] to server i),
  // sent to all at once; the responses in server order, or the first error.
  absl::StatusOr<std::vector<HoldResponse>> HoldAll(
      const HoldRequest& request) override;
  absl::StatusOr<std::vector<SaveShardResponse>> SaveShards(
      const std::vector<SaveShardRequest>& requests,
      absl::Duration timeout) override;
  absl::StatusOr<std::vector<RestoreShardResponse>> RestoreShards(
      const std::vector<RestoreShardRequest>& requests,
      absl::Duration timeout) override;

  // BOUNDED mode: tells every server, at once, which workers no longer
  // bound the others (each call bounded by `timeout`).
  absl::Status ExcludeWorkers(const std::vector<int>& workers,
                              absl::Duration timeout = absl::Seconds(10));

  // Tells every server to stop, all at once, each call bounded by
  // `timeout`: one hung server never holds up the others (or the caller)
  // for longer. Returns the first error.
  absl::Status ShutdownAll(const std::string& reason,
                           absl::Duration timeout = absl::Seconds(10));
  // Tells server `ps` (0 <= ps < num_shards()) to stop.
  absl::Status Shutdown(int ps, const std::string& reason,
                        absl::Duration timeout = absl::Seconds(10));

  // Cancels every call to every server still in flight (PsShard::
  // CancelInFlight): a task that learned the job ended stops waiting for
  // pulls that will never be answered. Safe from any thread.
  void CancelInFlight();
  // CancelInFlight, and every later call ends Cancelled at once
  // (PsShard::Close): for a task whose job ended. Safe from any thread.
  void Close();

  // ---- Embedding tables (ps_client_rows.cc) ----

  // Creates `tables` on every server (each holds the rows whose ids hash
  // to it, common/job/row_placement.h). Idempotent for identical specs.
  absl::Status CreateTables(const std::vector<EmbeddingTableSpec>& tables);

  // One table's share of a rows pull or push. Ids may repeat.
  struct TableRows {
    std::string table;
    int dim = 0;
    absl::Span<const int64_t> ids;
    // Pull: receives ids.size() x dim floats, row i for ids[i].
    absl::Span<float> rows;
    // Push: ids.size() x dim gradient floats.
    absl::Span<const float> gradients;
    // The caller promises `ids` has no repeats (BatchRows' have none):
    // routing then skips its deduplication.
    bool distinct = false;
  };

  // Pulls the rows of every table's ids: each distinct id is asked once,
  // each server gets one request carrying its share of every table. A
  // `train` pull creates missing rows (see PullRowsRequest.train); SYNC:
  // waits until every table reached `min_version`. Returns the lowest
  // table version the rows were read at. Errors name the table and the
  // server.
  absl::StatusOr<int64_t> PullRows(absl::Span<const TableRows> tables,
                                   bool train, int64_t min_version = 0);
  // The same, started: the caller's `rows` buffers must stay valid until
  // the handle's Wait() returns (or the handle is dropped unwaited, which
  // never writes them). BOUNDED: with `clock`, each server answers once no
  // live worker is more than max_staleness steps behind clock.clock(), as
  // for PullForStep (clock.join() is refused: rows pulls never join).
  std::shared_ptr<RowsHandle> StartPullRows(
      absl::Span<const TableRows> tables, bool train, int64_t min_version = 0,
      std::optional<WorkerClock> clock = std::nullopt);

  // Pushes every table's gradients: the gradients of a repeated id are
  // summed first, and each server gets one request with its rows. SYNC:
  // `version` is the table version the gradients come from; a stale part
  // is Aborted (the first error is returned, after every server answered).
  absl::Status PushRows(absl::Span<const TableRows> tables, int64_t version,
                        int worker);
  // The same, started: the gradients are summed (copied) before it
  // returns, so the caller's buffers may change at once.
  std::shared_ptr<RowsHandle> StartPushRows(absl::Span<const TableRows> tables,
                                            int64_t version, int worker);

  const Placement& placement() const override { return placement_; }
  int num_shards() const override { return static_cast<int>(shards_.size()); }

 private:
  enum class Op { kPull, kPush, kPushThenPull, kAssign };

  // One chunk (or less) of one variable part, and its slice of the buffer.
  struct Piece {
    int ps;
    const std::string* part;  // the part's name on its server
    int64_t offset;           // in the part
    absl::Span<float> data;
    // kPushThenPull: the gradient sent for this piece (`data` receives the
    // values).
    absl::Span<const float> gradient;
  };

  // What a pull or push batch carries besides its parts.
  struct BatchOptions {
    int64_t version = 0;  // pulls: min_version; pushes: the version
    int worker = 0;       // pushes
    bool consistent_snapshot = false;
    std::optional<WorkerClock> pull_clock;  // BOUNDED pulls
    std::optional<int64_t> push_clock;      // BOUNDED pushes
  };

  // Issues one batch RPC per full chunk, and one per server for each
  // chunk's worth of smaller pieces; one Assign RPC per chunk.
  // kPushThenPull: `gradients[i]` is sent for targets[i].
  std::shared_ptr<PsHandle> Issue(
      Op op, const std::vector<Mutable>& targets, const BatchOptions& options,
      const std::vector<Const>* gradients = nullptr);
  void IssueAssign(const Piece& piece, absl::Time deadline,
                   const std::shared_ptr<PsHandle::State>& state,
                   const std::shared_ptr<const void>& guard);
  // `batches_to_server`: how many batches of this call go to its server.
  void IssueBatch(Op op, const std::vector<const Piece*>& batch,
                  const BatchOptions& options, int batches_to_server,
                  absl::Time deadline,
                  const std::shared_ptr<PsHandle::State>& state,
                  const std::shared_ptr<const void>& guard);

  const std::vector<std::unique_ptr<PsShard>> shards_;
  const Placement placement_;
  const Options options_;
  int64_t chunk_elements_ = 0;  // set by Configure
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PS_CLIENT_H_
