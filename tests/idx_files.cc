#include "tests/idx_files.h"

#include "common/file_util.h"
#include "common/status_macros.h"
#include "tests/test_paths.h"

namespace psflow::testing {

absl::StatusOr<std::string> WriteIdxFile(const std::string& name,
                                         const std::vector<int>& dims,
                                         const std::vector<uint8_t>& data) {
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (int d : dims) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back((d >> shift) & 0xff);
  }
  bytes.append(data.begin(), data.end());
  const std::string path = TempPath(name);
  RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  return path;
}

}  // namespace psflow::testing
