#include "common/rpc/claimed_worker.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(ClaimedWorkerTest, ACertifiedWorkerSpeaksForItselfOnly) {
  EXPECT_OK(CheckClaimedWorker("worker-3", 3));
  EXPECT_THAT(CheckClaimedWorker("worker-1", 0),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("certificate names worker-1, but the call "
                                 "speaks for worker 0")));
  EXPECT_THAT(CheckClaimedWorker("worker-0", -1),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

// A token names a role, not a task; the chief's and psctl's certificates
// are checked by their roles.
TEST(ClaimedWorkerTest, CallersThatNameNoWorkerAreNotCheckedHere) {
  for (const char* caller : {"", "worker", "chief", "chief-0", "psctl",
                             "evaluator-0", "worker-x", "ps-1"}) {
    EXPECT_OK(CheckClaimedWorker(caller, 5)) << caller;
  }
}

}  // namespace
}  // namespace psflow
