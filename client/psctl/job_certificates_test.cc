#include "client/psctl/job_certificates.h"

#include <sys/stat.h>

#include <cstdlib>

#include "common/rpc/transport_security.h"
#include "common/status_matchers.h"
#include "common/tf_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

ClusterSpec Cluster() {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(R"({"cluster": {
      "chief": ["c0.job.svc:2222"], "ps": ["10.0.0.1:2222"],
      "worker": ["w0.job.svc:2222", "w1.job.svc:2222"]},
      "task": {"type": "worker", "index": 0}})");
  EXPECT_OK(tf);
  return tf->cluster;
}

TEST(JobCertificatesTest, EveryTaskGetsACertificateForItsHost) {
  ASSERT_OK_AND_ASSIGN(JobCertificates certs,
                       MakeJobCertificates(Cluster(), "demo", absl::Hours(1)));
  std::vector<std::string> names;
  for (const auto& [name, pair] : certs.tasks) names.push_back(name);
  EXPECT_THAT(names,
              ElementsAre("chief-0", "ps-0", "psctl", "worker-0", "worker-1"));
  ASSERT_OK_AND_ASSIGN(CertificateInfo ps,
                       DescribeCertificate(certs.tasks["ps-0"].certificate));
  EXPECT_EQ(ps.common_name, "ps-0");
  EXPECT_THAT(ps.hosts, ElementsAre("10.0.0.1"));
  ASSERT_OK_AND_ASSIGN(
      CertificateInfo worker,
      DescribeCertificate(certs.tasks["worker-1"].certificate));
  EXPECT_THAT(worker.hosts, ElementsAre("w1.job.svc"));
  for (const auto& [name, pair] : certs.tasks) {
    EXPECT_OK(CheckCertificate(certs.ca.certificate, pair)) << name;
  }
}

TEST(JobCertificatesTest, FilesAreWrittenWithPrivateKeysPrivate) {
  ASSERT_OK_AND_ASSIGN(JobCertificates certs,
                       MakeJobCertificates(Cluster(), "demo", absl::Hours(1)));
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/tls";
  ASSERT_OK(WriteJobCertificates(certs, dir, SecretOptions{"demo-tls", "ml"}));
  struct stat key, cert, ca_key;
  ASSERT_EQ(stat((dir + "/worker-1.key").c_str(), &key), 0);
  ASSERT_EQ(stat((dir + "/worker-1.crt").c_str(), &cert), 0);
  ASSERT_EQ(stat((dir + "/ca.key").c_str(), &ca_key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600);
  EXPECT_EQ(ca_key.st_mode & 0777, 0600);
  EXPECT_EQ(cert.st_mode & 0777, 0644);
  // What a task loads from the directory fits together.
  EXPECT_OK(LoadMutualTls(dir + "/ca.crt", dir + "/worker-1.crt",
                          dir + "/worker-1.key"));
  EXPECT_OK(
      LoadMutualTls(dir + "/ca.crt", dir + "/psctl.crt", dir + "/psctl.key"));
}

TEST(JobCertificatesTest, TheSecretCarriesTaskFilesButNotTheCaKey) {
  ASSERT_OK_AND_ASSIGN(JobCertificates certs,
                       MakeJobCertificates(Cluster(), "demo", absl::Hours(1)));
  const std::string yaml =
      JobCertificatesSecret(certs, SecretOptions{"demo-tls", "ml"});
  EXPECT_THAT(yaml, HasSubstr("kind: Secret"));
  EXPECT_THAT(yaml, HasSubstr("name: demo-tls"));
  EXPECT_THAT(yaml, HasSubstr("namespace: ml"));
  EXPECT_THAT(yaml, HasSubstr("  ca.crt: "));
  EXPECT_THAT(yaml, HasSubstr("  worker-1.key: "));
  EXPECT_THAT(yaml, Not(HasSubstr("ca.key")));
  EXPECT_THAT(yaml, Not(HasSubstr("psctl.key")));
}

}  // namespace
}  // namespace psflow
