#include "common/signals.h"

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;

// One test: the watch is once per process.
TEST(SignalsTest, EachWatchedSignalReachesTheCallbackByName) {
  BlockTerminationSignals(Hangup::kStop);
  Mutex mu;
  std::vector<std::string> received;
  WatchTerminationSignals(
      [&](const std::string& name) {
        MutexLock lock(&mu);
        received.push_back(name);
      },
      Hangup::kStop);
  // With Hangup::kDefault, SIGHUP would end this process instead.
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    MutexLock lock(&mu);
    const size_t before = received.size();
    ASSERT_EQ(kill(getpid(), signal), 0);
    struct Arrived {
      const std::vector<std::string>* received;
      size_t before;
      bool Check() const { return received->size() > before; }
    } arrived{&received, before};
    // A bound, not an expected time.
    ASSERT_TRUE(mu.AwaitWithTimeout(Condition(&arrived, &Arrived::Check),
                                    absl::Seconds(30)))
        << "no callback for signal " << signal;
  }
  MutexLock lock(&mu);
  EXPECT_THAT(received, ElementsAre("SIGTERM", "SIGINT", "SIGHUP"));
}

}  // namespace
}  // namespace psflow
