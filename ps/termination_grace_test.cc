#include "ps/termination_grace.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The server's side: the shutdowns it was asked for.
class Shutdowns {
 public:
  void Request(const std::string& reason) {
    MutexLock lock(&mu_);
    reasons_.push_back(reason);
  }
  std::vector<std::string> reasons() {
    MutexLock lock(&mu_);
    return reasons_;
  }
  std::vector<std::string> AwaitOne() {
    MutexLock lock(&mu_);
    mu_.Await(Condition(
        +[](std::vector<std::string>* r) { return !r->empty(); }, &reasons_));
    return reasons_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> reasons_ ABSL_GUARDED_BY(mu_);
};

TEST(TerminationGraceTest, AServerNoJobUsesStopsAtOnce) {
  Shutdowns server;
  TerminationGrace grace([&](const std::string& r) { server.Request(r); });
  grace.OnSignal("SIGTERM", absl::Hours(1), /*in_use=*/false);
  EXPECT_THAT(server.reasons(), ElementsAre("received SIGTERM"));
}

TEST(TerminationGraceTest, AServerInUseWaitsForTheChief) {
  Shutdowns server;
  int graces = 0;
  {
    TerminationGrace grace([&](const std::string& r) { server.Request(r); },
                           [&] { ++graces; });
    grace.OnSignal("SIGTERM", absl::Hours(1), /*in_use=*/true);
    EXPECT_THAT(server.reasons(), IsEmpty());
    // The server says it is going (the chief saves a checkpoint now).
    EXPECT_EQ(graces, 1);
    // The chief's shutdown stopped the server: the timer does nothing.
    grace.Stopped();
  }
  EXPECT_THAT(server.reasons(), IsEmpty());
}

TEST(TerminationGraceTest, TheGraceRunningOutStopsTheServer) {
  Shutdowns server;
  FakeClock clock;
  TerminationGrace grace([&](const std::string& r) { server.Request(r); },
                         [] {}, &clock);
  grace.OnSignal("SIGINT", absl::Seconds(70), /*in_use=*/true);
  clock.AwaitWaiters(1);
  clock.Advance(absl::Seconds(69));
  clock.AwaitSettled(1);
  EXPECT_THAT(server.reasons(), IsEmpty()) << "a second of grace is left";
  clock.Advance(absl::Seconds(1));
  std::vector<std::string> reasons = server.AwaitOne();
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_THAT(reasons[0], HasSubstr("received SIGINT 1m10s ago and the chief "
                                    "did not stop this server"));
}

TEST(TerminationGraceTest, ASecondSignalStopsAtOnce) {
  Shutdowns server;
  TerminationGrace grace([&](const std::string& r) { server.Request(r); });
  grace.OnSignal("SIGTERM", absl::Hours(1), /*in_use=*/true);
  grace.OnSignal("SIGTERM", absl::Hours(1), /*in_use=*/true);
  EXPECT_THAT(server.reasons(), ElementsAre("received SIGTERM"));
  grace.Stopped();
}

}  // namespace
}  // namespace psflow
