#include "common/rpc/grpc_status.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

TEST(GrpcStatusTest, EveryCodeRoundTrips) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status status(static_cast<absl::StatusCode>(code),
                        code == 0 ? "" : "message");
    grpc::Status wire = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(FromGrpcStatus(wire), status);
  }
}

TEST(GrpcStatusTest, ContextIsPrefixedToErrors) {
  grpc::Status wire(grpc::StatusCode::UNAVAILABLE, "connection refused");
  EXPECT_THAT(FromGrpcStatus(wire, "pull from ps-1 at h:2222"),
              StatusIs(absl::StatusCode::kUnavailable,
                       "pull from ps-1 at h:2222: connection refused"));
  EXPECT_OK(FromGrpcStatus(grpc::Status::OK, "ignored"));
}

}  // namespace
}  // namespace psflow
