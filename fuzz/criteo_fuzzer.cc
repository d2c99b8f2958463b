// Criteo click-through-rate text (data/criteo.h): the bytes are parsed as
// text in the Criteo shape (13 integer, 26 categorical columns) and in a
// small one (2 and 3), so short inputs reach the value parsers too, and
// read as a file, plain or gzipped, through an anonymous memory file. A
// result that breaks CtrExamples' invariants aborts: the fuzzer reports it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/criteo.h"

namespace {

void CheckInvariants(const absl::StatusOr<psflow::CtrExamples>& parsed) {
  if (!parsed.ok()) return;
  const psflow::CtrExamples& e = *parsed;
  const int64_t bags = e.num_examples * e.num_fields;
  bool ok =
      e.num_examples > 0 &&
      static_cast<int64_t>(e.labels.size()) == e.num_examples &&
      static_cast<int64_t>(e.dense.size()) == e.num_examples * e.num_dense &&
      static_cast<int64_t>(e.offsets.size()) == bags + 1 &&
      e.offsets.front() == 0 &&
      e.offsets.back() == static_cast<int64_t>(e.ids.size());
  for (size_t i = 1; ok && i < e.offsets.size(); ++i) {
    ok = e.offsets[i] >= e.offsets[i - 1];
  }
  for (uint8_t label : e.labels) ok = ok && label <= 1;
  for (int64_t id : e.ids) ok = ok && id >= 0;
  for (float x : e.dense) ok = ok && x >= 0;
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  psflow::CriteoFormat criteo;
  // Bounds memory for a gzip bomb as much as for long text.
  criteo.max_examples = 1 << 16;
  CheckInvariants(psflow::ParseCriteoText(text, criteo, "fuzz"));
  psflow::CriteoFormat small = criteo;
  small.num_dense = 2;
  small.num_fields = 3;
  CheckInvariants(psflow::ParseCriteoText(text, small, "fuzz"));

  const int fd = memfd_create("criteo", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  CheckInvariants(psflow::LoadCriteoFile(path, criteo));
  CheckInvariants(psflow::LoadCriteoFile(path, small));
  close(fd);
  return 0;
}
