#include "client/batch_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psflow {

BatchRows::BatchRows(std::vector<ModelTable> tables)
    : tables_(std::move(tables)),
      ids_(tables_.size()),
      rows_(tables_.size()),
      gradients_(tables_.size()) {}

absl::Status BatchRows::Prepare(const Batch& batch) {
  if (batch.num_fields <= 0 ||
      batch.offsets.size() !=
          static_cast<size_t>(batch.size) * batch.num_fields + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", batch.size,
        " examples without bags of ids for the model's embedding tables; a "
        "model with tables needs click-through-rate data"));
  }
  unique_.clear();
  slots_.resize(batch.ids.size());
  numbering_.Reset(batch.ids.size());
  for (size_t k = 0; k < batch.ids.size(); ++k) {
    const int32_t slot = numbering_.Add(batch.ids[k]);
    if (slot == static_cast<int32_t>(unique_.size())) {
      unique_.push_back(batch.ids[k]);
    }
    slots_[k] = slot;
  }
  sparse_ = SparseBatch();
  sparse_.num_fields = batch.num_fields;
  sparse_.offsets = batch.offsets;
  sparse_.ids = batch.ids;
  sparse_.slots = slots_;
  sparse_.num_unique = static_cast<int64_t>(unique_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (int field : tables_[t].fields) {
      if (field < 0 || field >= batch.num_fields) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", tables_[t].name(), " reads field ", field,
            " but the batch has ", batch.num_fields, " categorical fields"));
      }
    }
    if (!tables_[t].fields.empty()) CollectTableIds(batch, t);
    const std::vector<int64_t>& unique = UniqueOf(t);
    const size_t floats = unique.size() * tables_[t].dim();
    rows_[t].resize(floats);
    gradients_[t].resize(floats);
    sparse_.table_slots.push_back(tables_[t].fields.empty()
                                      ? absl::Span<const int32_t>(slots_)
                                      : ids_[t].slots);
    sparse_.table_rows.push_back(static_cast<int64_t>(unique.size()));
    sparse_.rows.push_back(rows_[t]);
    sparse_.row_gradients.push_back(absl::MakeSpan(gradients_[t]));
  }
  return absl::OkStatus();
}

void BatchRows::CollectTableIds(const Batch& batch, size_t t) {
  TableIds& ids = ids_[t];
  ids.unique.clear();
  ids.slots.assign(batch.ids.size(), -1);
  // The table's distinct ids, in the order of the batch's distinct ids.
  std::vector<int32_t> row_of_slot(unique_.size(), -1);
  for (int64_t i = 0; i < batch.size; ++i) {
    for (int field : tables_[t].fields) {
      const int64_t at = i * batch.num_fields + field;
      for (int64_t k = batch.offsets[at]; k < batch.offsets[at + 1]; ++k) {
        int32_t& row = row_of_slot[slots_[k]];
        if (row < 0) {
          row = static_cast<int32_t>(ids.unique.size());
          ids.unique.push_back(unique_[slots_[k]]);
        }
        ids.slots[k] = row;
      }
    }
  }
}

absl::Status BatchRows::Pull(ParameterClient& client, bool train,
                             int64_t min_version) {
  return StartPull(client, train, min_version)->Wait();
}

std::shared_ptr<RowsHandle> BatchRows::StartPull(
    ParameterClient& client, bool train, int64_t min_version,
    std::optional<WorkerClock> clock) {
  std::vector<ParameterClient::TableRows> parts;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (UniqueOf(t).empty()) continue;
    parts.push_back({tables_[t].name(),
                     tables_[t].dim(),
                     UniqueOf(t),
                     absl::MakeSpan(rows_[t]),
                     {},
                     /*distinct=*/true});
  }
  return client.StartPullRows(parts, train, min_version, std::move(clock));
}

absl::Status BatchRows::Push(ParameterClient& client, int64_t version,
                             int worker) {
  return StartPush(client, version, worker)->Wait();
}

std::shared_ptr<RowsHandle> BatchRows::StartPush(ParameterClient& client,
                                                 int64_t version, int worker) {
  std::vector<ParameterClient::TableRows> parts;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (UniqueOf(t).empty()) continue;
    parts.push_back({tables_[t].name(),
                     tables_[t].dim(),
                     UniqueOf(t),
                     {},
                     gradients_[t],
                     /*distinct=*/true});
  }
  return client.StartPushRows(parts, version, worker);
}

}  // namespace psflow
