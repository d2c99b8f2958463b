// A thread that still uses OpenSSL while the process exits: the case of
// gRPC's event-engine threads finishing a TLS handshake as a role binary
// returns from main(). With OpenSSL's own exit handler that thread
// segfaults on freed state (and, under LeakSanitizer, its per-thread
// random generators are reported as leaked); with this library linked it
// works and the process exits 0.
#include "common/tls/openssl_lifetime.h"

#include <openssl/rand.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"

namespace psflow {
namespace {

std::atomic<bool> late_call_requested{false};
std::atomic<int> late_call_result{-1};
std::thread* late_thread = nullptr;

// Runs after every exit handler registered after it, OpenSSL's included
// when there is one: the thread's second call then meets a cleaned-up
// library.
void UseOpenSslAtExit() {
  late_call_requested = true;
  late_thread->join();
  if (late_call_result != 1) std::_Exit(3);
}

void ExitWhileAThreadUsesOpenSsl() {
  std::atexit(UseOpenSslAtExit);
  std::atomic<bool> first_call_done{false};
  late_thread = new std::thread([&first_call_done] {
    unsigned char bytes[32];
    // Creates this thread's random generators, as a TLS handshake does.
    (void)RAND_bytes(bytes, sizeof(bytes));
    first_call_done = true;
    while (!late_call_requested) std::this_thread::yield();
    late_call_result = RAND_bytes(bytes, sizeof(bytes));
  });
  while (!first_call_done) std::this_thread::yield();
  std::exit(0);
}

TEST(OpenSslLifetimeTest, ThreadsMayUseOpenSslWhileTheProcessExits) {
  ASSERT_TRUE(KeepOpenSslUntilProcessExit());
  EXPECT_EXIT(ExitWhileAThreadUsesOpenSsl(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace psflow
