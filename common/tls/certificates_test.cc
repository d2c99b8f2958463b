#include "common/tls/certificates.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
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

// gRPC would trust every certificate in the CA file, while the start-up
// check read only the first: another CA's "chief-0" could command the job.
TEST(CertificatesTest, ACaFileWithTwoCertificatesIsRefused) {
  ASSERT_OK_AND_ASSIGN(PemPair ours,
                       MakeCertificateAuthority("ours", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(PemPair theirs,
                       MakeCertificateAuthority("theirs", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair ps,
      MakeCertificate(ours, "ours", "ps-0", {"127.0.0.1"}, absl::Hours(1)));
  ASSERT_OK(CheckCertificate(ours.certificate, ps));
  // Theirs as a "TRUSTED CERTIFICATE" block, which gRPC trusts too.
  std::unique_ptr<BIO, decltype(&BIO_free_all)> in(
      BIO_new_mem_buf(theirs.certificate.data(),
                      static_cast<int>(theirs.certificate.size())),
      &BIO_free_all);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr), &X509_free);
  ASSERT_NE(cert, nullptr);
  ASSERT_NE(X509_add1_trust_object(cert.get(), OBJ_nid2obj(NID_server_auth)),
            0);
  std::unique_ptr<BIO, decltype(&BIO_free_all)> out(BIO_new(BIO_s_mem()),
                                                    &BIO_free_all);
  ASSERT_EQ(PEM_write_bio_X509_AUX(out.get(), cert.get()), 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  const std::string trusted(data, size);
  ASSERT_THAT(trusted, HasSubstr("BEGIN TRUSTED CERTIFICATE"));
  for (const std::string& bundle :
       {ours.certificate + theirs.certificate,
        theirs.certificate + ours.certificate, trusted + ours.certificate,
        ours.certificate + trusted}) {
    EXPECT_THAT(CheckCertificate(bundle, ps),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("the CA file holds 2 certificates")));
  }
}

// OpenSSL would ask the terminal for the passphrase: a task would hang.
TEST(CertificatesTest, AnEncryptedKeyIsNamedNotPromptedFor) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("job", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair ps, MakeCertificate(ca, "job", "ps-0", {"h"}, absl::Hours(1)));
  // The same key, encrypted with a passphrase (AES-256, PKCS#8).
  std::unique_ptr<BIO, decltype(&BIO_free_all)> in(
      BIO_new_mem_buf(ps.private_key.data(),
                      static_cast<int>(ps.private_key.size())),
      &BIO_free_all);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr),
      &EVP_PKEY_free);
  ASSERT_NE(key, nullptr);
  std::unique_ptr<BIO, decltype(&BIO_free_all)> out(BIO_new(BIO_s_mem()),
                                                    &BIO_free_all);
  char passphrase[] = "secret";
  ASSERT_EQ(
      PEM_write_bio_PKCS8PrivateKey(out.get(), key.get(), EVP_aes_256_cbc(),
                                    passphrase, 6, nullptr, nullptr),
      1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  const std::string encrypted(data, size);
  ASSERT_THAT(encrypted, HasSubstr("ENCRYPTED"));
  EXPECT_THAT(CheckCertificate(ca.certificate, {ps.certificate, encrypted}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("an encrypted private key")));
}

TEST(CertificatesTest, ACertificateMustNameItsTaskAndCoverItsHost) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("job", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(PemPair ps,
                       MakeCertificate(ca, "job", "ps-0",
                                       {"127.0.0.1", "job-ps-0.job.svc", "::1"},
                                       absl::Hours(1)));
  ASSERT_OK(CheckCertificateIdentity(ps.certificate, "ps-0", "127.0.0.1"));
  ASSERT_OK(CheckCertificateIdentity(ps.certificate, "ps-0", "::1"));
  ASSERT_OK(
      CheckCertificateIdentity(ps.certificate, "ps-0", "JOB-PS-0.job.svc"));
  ASSERT_OK(CheckCertificateIdentity(ps.certificate, "ps-0", ""));
  // Another task's pair: peers would take this server for worker-1.
  EXPECT_THAT(CheckCertificateIdentity(ps.certificate, "worker-1", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("named \"ps-0\", not \"worker-1\""),
                             HasSubstr("worker-1.crt"))));
  // A host its peers dial that the certificate does not cover.
  EXPECT_THAT(CheckCertificateIdentity(ps.certificate, "ps-0", "10.9.9.9"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("does not cover 10.9.9.9"),
                             HasSubstr("127.0.0.1, job-ps-0.job.svc, ::1"))));
  EXPECT_THAT(
      CheckCertificateIdentity(ps.certificate, "ps-0", "job-ps-1.job.svc"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("does not cover job-ps-1.job.svc")));
  // A DNS name is never matched by the subject's CN (gRPC does that only
  // for certificates without subjectAltNames, which psctl never makes).
  EXPECT_THAT(CheckCertificateIdentity(ps.certificate, "ps-0", "ps-0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not cover ps-0")));
  // Wildcards as gRPC matches them: a whole leftmost label only.
  ASSERT_OK_AND_ASSIGN(
      PemPair wild,
      MakeCertificate(ca, "job", "ps-0", {"*.job.svc", "p*.other.svc"},
                      absl::Hours(1)));
  EXPECT_OK(CheckCertificateIdentity(wild.certificate, "ps-0", "ps-0.job.svc"));
  EXPECT_THAT(
      CheckCertificateIdentity(wild.certificate, "ps-0", "ps-0.other.svc"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("does not cover ps-0.other.svc")));
}

}  // namespace
}  // namespace psflow
