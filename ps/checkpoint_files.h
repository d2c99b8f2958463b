// Checkpoint data files opened by path, once each, for a server's restore
// (dense slices in shard_checkpoint.cc, table segments in
// table_checkpoint.cc). Not part of the server's interface.
//
// Thread-compatible; Get() must not race with itself, but the files it
// returns may be read from any number of threads.
#ifndef PSFLOW_PS_CHECKPOINT_FILES_H_
#define PSFLOW_PS_CHECKPOINT_FILES_H_

#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace psflow {

class CheckpointFiles {
 public:
  // The open file at `path`; DataLoss naming it and the remedy when it is
  // missing or unreadable.
  absl::StatusOr<const RandomAccessFile*> Get(const std::string& path) {
    auto it = files_.find(path);
    if (it == files_.end()) {
      absl::StatusOr<RandomAccessFile> opened = RandomAccessFile::Open(path);
      if (!opened.ok()) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint data file missing or unreadable: ",
            opened.status().message(),
            "; the checkpoint is incomplete: restore another one"));
      }
      it = files_.emplace(path, *std::move(opened)).first;
    }
    return &it->second;
  }

 private:
  std::map<std::string, RandomAccessFile> files_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_CHECKPOINT_FILES_H_
