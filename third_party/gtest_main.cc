// Entry point for every cc_test: plain GoogleTest + GoogleMock main.
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#if defined(__SANITIZE_THREAD__)
// Under --config=tsan: Debian's gRPC, protobuf and abseil are not
// instrumented, so TSan cannot see how they synchronize, and the memory
// calls they make (memcpy, new, epoll) look unordered. These entries make
// TSan ignore the calls those libraries make; every access made by our
// code is still checked. (The TSan runtime looks this function up by name;
// gtest_main is linked statically so the executable exports it.)
extern "C" const char* __tsan_default_suppressions() {
  // One entry per library: a pattern may match only one.
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libaddress_sorting.so\n"
         "called_from_lib:libcares.so\n"
         "called_from_lib:libssl.so\n"
         "called_from_lib:libcrypto.so\n"
         "called_from_lib:libre2.so\n"
         "called_from_lib:libprotobuf.so\n"
         "called_from_lib:libabsl_base.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_spinlock_wait.so\n"
         "called_from_lib:libabsl_malloc_internal.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "called_from_lib:libabsl_cordz_info.so\n"
         "called_from_lib:libabsl_cordz_handle.so\n"
         "called_from_lib:libabsl_cordz_functions.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_statusor.so\n"
         "called_from_lib:libabsl_hashtablez_sampler.so\n"
         "called_from_lib:libabsl_raw_hash_set.so\n"
         "called_from_lib:libabsl_time_zone.so\n"
         "called_from_lib:libabsl_time.so\n"
         "called_from_lib:libabsl_strings.so\n"
         "called_from_lib:libabsl_str_format_internal.so\n"
         "called_from_lib:libabsl_random_internal_pool_urbg.so\n"
         "called_from_lib:libabsl_random_internal_randen.so\n";
}
#endif

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
