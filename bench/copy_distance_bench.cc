// memcpy's speed by the distance between destination and source modulo
// 4 KiB. glibc 2.36 (Debian 12) copies blocks of a few KiB and more with
// `rep movsb` on CPUs that advertise fast string moves, and on AMD Zen 3/4
// that instruction runs many times slower when the destination lies just
// past the source modulo a page (glibc bug 30994). psflow's copies of
// tensors (bench/RESULTS.md, "memcpy and the distance between buffers")
// keep 16-byte-multiple distances; this shows where the cliff is on the
// host at hand, for `GLIBC_TUNABLES` comparisons:
//
//   bazel build --config=opt //bench:copy_distance_bench
//   bazel-bin/bench/copy_distance_bench
//   GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295 \
//       bazel-bin/bench/copy_distance_bench
//
// Prints, per copy size, the best of 100 copies' wall time (in cache: the
// same buffers each time) at each distance.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main() {
  constexpr size_t kSizes[] = {16 << 10, 256 << 10, 814080};
  constexpr int kDistances[] = {0,  4,   8,   12,   16,   32,  60,
                                64, 128, 512, 2048, 4032, 4092};
  std::printf("%-10s", "bytes");
  for (int d : kDistances) std::printf(" %7d", d);
  std::printf("   (distance mod 4096; best of 100, microseconds)\n");
  for (size_t n : kSizes) {
    char* source = static_cast<char*>(std::aligned_alloc(4096, n + 8192));
    char* target = static_cast<char*>(std::aligned_alloc(4096, n + 8192));
    std::memset(source, 1, n + 8192);
    std::memset(target, 2, n + 8192);
    std::printf("%-10zu", n);
    for (int distance : kDistances) {
      double best = 1e30;
      for (int i = 0; i < 100; ++i) {
        const auto start = std::chrono::steady_clock::now();
        std::memcpy(target + distance, source, n);
        asm volatile("" ::: "memory");  // keep every copy
        const auto end = std::chrono::steady_clock::now();
        best = std::min(
            best,
            std::chrono::duration<double, std::micro>(end - start).count());
      }
      std::printf(" %7.1f", best);
    }
    std::printf("\n");
    std::free(source);
    std::free(target);
  }
  return 0;
}
