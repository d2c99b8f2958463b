#include "common/host_port.h"

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(HostPortTest, ParsesDnsNames) {
  ASSERT_OK_AND_ASSIGN(HostPort hp, ParseHostPort("j-ps-0.ns.svc:2222"));
  EXPECT_EQ(hp.host, "j-ps-0.ns.svc");
  EXPECT_EQ(hp.port, 2222);
  EXPECT_EQ(hp.ToString(), "j-ps-0.ns.svc:2222");
}

TEST(HostPortTest, ParsesIpv4) {
  ASSERT_OK_AND_ASSIGN(HostPort hp, ParseHostPort("127.0.0.1:65535"));
  EXPECT_EQ(hp.host, "127.0.0.1");
  EXPECT_EQ(hp.port, 65535);
}

TEST(HostPortTest, ParsesBracketedIpv6AndKeepsBracketsInToString) {
  ASSERT_OK_AND_ASSIGN(HostPort hp, ParseHostPort("[::1]:80"));
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.port, 80);
  EXPECT_EQ(hp.ToString(), "[::1]:80");
}

TEST(HostPortTest, AcceptsPortZeroForTheCallerToJudge) {
  ASSERT_OK_AND_ASSIGN(HostPort hp, ParseHostPort("localhost:0"));
  EXPECT_EQ(hp.port, 0);
}

TEST(HostPortTest, AcceptsUnderscoresFromContainerServiceNames) {
  EXPECT_OK(ParseHostPort("my_service_1:2222"));
}

struct BadAddress {
  const char* address;
  const char* message;
};

class HostPortRejectionTest : public ::testing::TestWithParam<BadAddress> {};

TEST_P(HostPortRejectionTest, NamesTheProblemAndTheFix) {
  EXPECT_THAT(ParseHostPort(GetParam().address),
              StatusIs(kInvalid, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    BadAddresses, HostPortRejectionTest,
    ::testing::Values(BadAddress{"", "is empty; give host:port"},
                      BadAddress{"host",
                                 "has no port; write it as host:port, e.g. "
                                 "\"host:2222\""},
                      BadAddress{":2222", "has an empty host"},
                      BadAddress{"host:", "has an empty port"},
                      BadAddress{"host:22a",
                                 "has port \"22a\", which is not a number"},
                      BadAddress{"host:-1", "which is not a number"},
                      BadAddress{"host:65536", "out of range; use 1-65535"},
                      BadAddress{"host:99999999999", "out of range"},
                      BadAddress{"::1:2222", "IPv6 address without brackets"},
                      BadAddress{"[::1]", "has no port after the IPv6 address"},
                      BadAddress{"[::1:2222", "without a closing ']'"},
                      BadAddress{"[]:2222", "do not hold an IPv6 address"},
                      BadAddress{"[zz::1]:2222", "in its IPv6 address"},
                      BadAddress{"grpc://host:2222", "has a URL scheme"},
                      BadAddress{"host/path:2222", "contains '/'"},
                      BadAddress{"host :2222", "contains whitespace"},
                      BadAddress{"a..b:2222", "empty label"},
                      BadAddress{".host:2222", "empty label"},
                      BadAddress{"-host:2222", "starts or ends with '-'"},
                      BadAddress{"ho$t:2222", "has character '$'"}));

TEST(HostPortTest, RejectsOverlongLabels) {
  std::string label(64, 'a');
  EXPECT_THAT(ParseHostPort(label + ".com:1"),
              StatusIs(kInvalid, HasSubstr("longer than 63")));
}

}  // namespace
}  // namespace psflow
