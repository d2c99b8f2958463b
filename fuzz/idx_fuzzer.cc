// IDX data files, raw and gzipped: the bytes go into an anonymous memory
// file, read through its /proc/self/fd path like any data file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/idx_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("idx", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  (void)psflow::ReadIdxHeader(path);
  (void)psflow::ReadIdxFile(path);
  close(fd);
  return 0;
}
