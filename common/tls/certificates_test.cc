#include "common/tls/certificates.h"

#include "absl/time/clock.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CertificatesTest, ATaskCertificateNamesItsTaskAndHosts) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("demo", absl::Hours(24)));
  EXPECT_THAT(ca.certificate, StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(ca.private_key, StartsWith("-----BEGIN PRIVATE KEY-----"));
  ASSERT_OK_AND_ASSIGN(
      PemPair worker,
      MakeCertificate(ca, "demo", "worker-1",
                      {"127.0.0.1", "demo-worker-1.demo.svc", "::1"},
                      absl::Hours(24)));
  ASSERT_OK(CheckCertificate(ca.certificate, worker));
  ASSERT_OK_AND_ASSIGN(CertificateInfo info,
                       DescribeCertificate(worker.certificate));
  EXPECT_EQ(info.common_name, "worker-1");
  EXPECT_THAT(info.hosts,
              ElementsAre("127.0.0.1", "demo-worker-1.demo.svc", "::1"));
  EXPECT_GT(info.not_after, absl::Now() + absl::Hours(23));
  EXPECT_LT(info.not_after, absl::Now() + absl::Hours(25));
}

TEST(CertificatesTest, AnotherJobsCaDoesNotVerify) {
  ASSERT_OK_AND_ASSIGN(PemPair ours,
                       MakeCertificateAuthority("ours", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(PemPair theirs,
                       MakeCertificateAuthority("theirs", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(PemPair stranger,
                       MakeCertificate(theirs, "theirs", "worker-0",
                                       {"127.0.0.1"}, absl::Hours(1)));
  EXPECT_THAT(CheckCertificate(ours.certificate, stranger),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not verify against the CA")));
}

TEST(CertificatesTest, AKeyFromAnotherCertificateIsRefused) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("job", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair a, MakeCertificate(ca, "job", "ps-0", {"h0"}, absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair b, MakeCertificate(ca, "job", "ps-1", {"h1"}, absl::Hours(1)));
  PemPair mixed{a.certificate, b.private_key};
  EXPECT_THAT(CheckCertificate(ca.certificate, mixed),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not belong to the certificate")));
}

TEST(CertificatesTest, GarbageIsNamedNotCrashedOn) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("job", absl::Hours(1)));
  EXPECT_THAT(DescribeCertificate("not a certificate"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a PEM certificate")));
  EXPECT_THAT(CheckCertificate(ca.certificate, {"junk", ca.private_key}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the certificate: not a PEM certificate")));
  EXPECT_THAT(MakeCertificate(ca, "job", "w", {"a b"}, absl::Hours(1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a host name")));
}

}  // namespace
}  // namespace psflow
