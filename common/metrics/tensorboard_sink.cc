#include "common/metrics/tensorboard_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace psflow {

std::string TensorBoardTag(const FamilySnapshot& family,
                           const SeriesSnapshot& series,
                           absl::string_view suffix) {
  std::string tag = absl::StrCat(family.name, suffix);
  if (family.label_names.empty()) return tag;
  tag.push_back('{');
  for (size_t i = 0; i < family.label_names.size(); ++i) {
    if (i > 0) tag.push_back(',');
    const absl::string_view value =
        i < series.label_values.size()
            ? absl::string_view(series.label_values[i])
            : absl::string_view();
    absl::StrAppend(&tag, family.label_names[i], "=", value);
  }
  tag.push_back('}');
  return tag;
}

absl::StatusOr<std::unique_ptr<TensorBoardSink>> TensorBoardSink::Create(
    const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<EventFileWriter> writer,
                   EventFileWriter::Create(dir));
  return std::make_unique<TensorBoardSink>(std::move(writer));
}

TensorBoardSink::TensorBoardSink(std::unique_ptr<EventFileWriter> writer)
    : writer_(std::move(writer)) {
  CHECK(writer_ != nullptr) << "TensorBoardSink needs an EventFileWriter";
}

absl::Status TensorBoardSink::WriteSnapshot(const MetricsSnapshot& snapshot,
                                            int64_t step,
                                            absl::Time wall_time) {
  for (const FamilySnapshot& family : snapshot.families) {
    for (const SeriesSnapshot& series : family.series) {
      if (family.type == MetricType::kHistogram) {
        RETURN_IF_ERROR(
            writer_->AddScalar(TensorBoardTag(family, series, "_sum"), step,
                               series.sum, wall_time));
        RETURN_IF_ERROR(
            writer_->AddScalar(TensorBoardTag(family, series, "_count"), step,
                               static_cast<double>(series.count), wall_time));
      } else {
        RETURN_IF_ERROR(writer_->AddScalar(TensorBoardTag(family, series), step,
                                           series.value, wall_time));
      }
    }
  }
  return writer_->Flush();
}

absl::Status TensorBoardSink::Write(const MetricsRegistry& registry,
                                    int64_t step) {
  return WriteSnapshot(registry.Snapshot(), step);
}

absl::Status TensorBoardSink::AddScalar(absl::string_view tag, int64_t step,
                                        double value, absl::Time wall_time) {
  return writer_->AddScalar(tag, step, value, wall_time);
}

absl::Status TensorBoardSink::Flush() { return writer_->Flush(); }

}  // namespace psflow
