#include "client/batch_rows.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace psflow {

BatchRows::BatchRows(std::vector<ModelTable> tables)
    : tables_(std::move(tables)),
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
  absl::flat_hash_map<int64_t, int32_t> slot_of;
  slot_of.reserve(batch.ids.size());
  for (size_t k = 0; k < batch.ids.size(); ++k) {
    auto [it, added] =
        slot_of.try_emplace(batch.ids[k], static_cast<int32_t>(unique_.size()));
    if (added) unique_.push_back(batch.ids[k]);
    slots_[k] = it->second;
  }
  sparse_ = SparseBatch();
  sparse_.num_fields = batch.num_fields;
  sparse_.offsets = batch.offsets;
  sparse_.ids = batch.ids;
  sparse_.slots = slots_;
  sparse_.num_unique = static_cast<int64_t>(unique_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    const size_t floats = unique_.size() * tables_[t].dim();
    rows_[t].resize(floats);
    gradients_[t].resize(floats);
    sparse_.rows.push_back(rows_[t]);
    sparse_.row_gradients.push_back(absl::MakeSpan(gradients_[t]));
  }
  return absl::OkStatus();
}

absl::Status BatchRows::Pull(ParameterClient& client, bool train,
                             int64_t min_version) {
  if (unique_.empty()) return absl::OkStatus();
  std::vector<ParameterClient::TableRows> parts;
  for (size_t t = 0; t < tables_.size(); ++t) {
    parts.push_back({tables_[t].name(),
                     tables_[t].dim(),
                     unique_,
                     absl::MakeSpan(rows_[t]),
                     {}});
  }
  return client.PullRows(parts, train, min_version).status();
}

absl::Status BatchRows::Push(ParameterClient& client, int64_t version,
                             int worker) {
  if (unique_.empty()) return absl::OkStatus();
  std::vector<ParameterClient::TableRows> parts;
  for (size_t t = 0; t < tables_.size(); ++t) {
    parts.push_back(
        {tables_[t].name(), tables_[t].dim(), unique_, {}, gradients_[t]});
  }
  return client.PushRows(parts, version, worker);
}

}  // namespace psflow
