// The sparse side of one batch for a model with embedding tables
// (model/model.h ModelTable): the batch's distinct ids, each id's slot
// among them, each table's rows of the distinct ids of its fields pulled
// from the parameter servers, and the row gradients the model writes,
// pushed back. Workers
// (training pulls and pushes) and the evaluator (pulls that create no
// rows) share it.
//
// Thread-compatible: one per trainer or evaluator thread; buffers are
// reused from batch to batch. A trainer that pulls the next batch's rows
// while the current one computes keeps two (worker/trainer.h).
#ifndef PSFLOW_CLIENT_BATCH_ROWS_H_
#define PSFLOW_CLIENT_BATCH_ROWS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "client/id_numbering.h"
#include "client/ps_client.h"
#include "data/batch_stream.h"
#include "model/model.h"

namespace psflow {

class BatchRows {
 public:
  explicit BatchRows(std::vector<ModelTable> tables);

  // Takes `batch`'s ids (which must outlive the next Pull and the model's
  // use of sparse()): finds the distinct ones and sizes the buffers.
  // InvalidArgument when the batch has no bags of ids.
  absl::Status Prepare(const Batch& batch);

  // Pulls every table's rows of the distinct ids in one request per
  // server. `train`: a training pull (creates rows, marks them used);
  // SYNC: waits until every table reached `min_version`.
  absl::Status Pull(ParameterClient& client, bool train, int64_t min_version);
  // The same, started (ParameterClient::StartPullRows; BOUNDED: `clock` is
  // the worker's step the rows are for). The rows reach sparse() when the
  // handle's Wait() succeeds; the handle must be waited on or dropped
  // before the next Prepare. Its version() is the table version the rows
  // were read at.
  std::shared_ptr<RowsHandle> StartPull(
      ParameterClient& client, bool train, int64_t min_version,
      std::optional<WorkerClock> clock = std::nullopt);

  // What the model reads (and where TrainStep writes row gradients).
  const SparseBatch& sparse() const { return sparse_; }

  // Pushes the row gradients the model wrote, one request per server.
  // SYNC: `version` is the step they belong to (a stale push is Aborted).
  absl::Status Push(ParameterClient& client, int64_t version, int worker);
  // The same, started: the gradients are copied before it returns, so the
  // next Prepare may follow at once.
  std::shared_ptr<RowsHandle> StartPush(ParameterClient& client,
                                        int64_t version, int worker);

  int64_t num_unique() const { return static_cast<int64_t>(unique_.size()); }

 private:
  // A table's ids among the batch's: the distinct ids of its fields and
  // each id occurrence's row (-1: another field's).
  struct TableIds {
    std::vector<int64_t> unique;
    std::vector<int32_t> slots;
  };
  // Fills ids_[t] for a table of some fields only.
  void CollectTableIds(const Batch& batch, size_t t);
  const std::vector<int64_t>& UniqueOf(size_t t) const {
    return tables_[t].fields.empty() ? unique_ : ids_[t].unique;
  }

  const std::vector<ModelTable> tables_;
  IdNumbering numbering_;  // the batch's ids to their slots
  std::vector<int64_t> unique_;
  std::vector<int32_t> slots_;
  std::vector<TableIds> ids_;  // per table; unused for every-field tables
  std::vector<std::vector<float>> rows_, gradients_;
  SparseBatch sparse_;
};

}  // namespace psflow

#endif  // PSFLOW_CLIENT_BATCH_ROWS_H_
