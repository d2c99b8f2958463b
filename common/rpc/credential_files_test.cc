// Credential files are checked like ssh's keys: real files, real modes.
#include "common/rpc/credential_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/rpc/job_tokens.h"
#include "common/rpc/transport_security.h"
#include "common/status_matchers.h"
#include "common/tls/certificates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh folder of mode `mode` holding `file` of mode `file_mode`.
std::string MakeFile(const std::string& name, mode_t dir_mode,
                     mode_t file_mode) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  EXPECT_OK(MakeDirectories(dir));
  EXPECT_EQ(chmod(dir.c_str(), dir_mode), 0);
  const std::string path = dir + "/file";
  EXPECT_OK(WriteFileWithMode(path, "secret\n", 0600));
  EXPECT_EQ(chmod(path.c_str(), file_mode), 0);
  return path;
}

TEST(CredentialFilesTest, PrivateSecretsAndReadOnlyPublicFilesPass) {
  EXPECT_OK(CheckCredentialFile(MakeFile("a", 0700, 0600),
                                CredentialKind::kSecret, "the key"));
  EXPECT_OK(CheckCredentialFile(MakeFile("b", 0755, 0400),
                                CredentialKind::kSecret, "the key"));
  // Kubernetes' Secret layout: group-readable by the process's own group,
  // in a sticky folder.
  EXPECT_OK(CheckCredentialFile(MakeFile("c", 01777, 0440),
                                CredentialKind::kSecret, "the key"));
  EXPECT_OK(CheckCredentialFile(MakeFile("d", 0755, 0644),
                                CredentialKind::kPublic, "the certificate"));
}

TEST(CredentialFilesTest, ASecretOthersCanReadIsRefusedWithTheFix) {
  for (mode_t mode : {0644, 0604, 0660, 0606, 0620}) {
    const std::string path = MakeFile(absl::StrCat("open", mode), 0700, mode);
    EXPECT_THAT(
        CheckCredentialFile(path, CredentialKind::kSecret, "the worker token"),
        StatusIs(absl::StatusCode::kPermissionDenied,
                 AllOf(HasSubstr("the worker token"), HasSubstr(path),
                       HasSubstr("chmod 600 " + path))))
        << std::oct << mode;
  }
}

TEST(CredentialFilesTest, AFileOthersCanChangeIsRefused) {
  const std::string path = MakeFile("writable", 0755, 0666);
  EXPECT_THAT(
      CheckCredentialFile(path, CredentialKind::kPublic, "the CA certificate"),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("writable by other users"),
                     HasSubstr("(mode 0666)"), HasSubstr("chmod go-w"))));
}

TEST(CredentialFilesTest, AFolderOthersCanWriteIsRefusedUnlessSticky) {
  const std::string path = MakeFile("loose", 0777, 0600);
  EXPECT_THAT(CheckCredentialFile(path, CredentialKind::kSecret, "the key"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("the folder of the key"),
                             HasSubstr("0777"), HasSubstr("chmod go-w"))));
  EXPECT_OK(CheckCredentialFile(MakeFile("sticky", 01777, 0600),
                                CredentialKind::kSecret, "the key"));
}

TEST(CredentialFilesTest, AMissingFileIsNotFound) {
  EXPECT_THAT(CheckCredentialFile(::testing::TempDir() + "/none",
                                  CredentialKind::kSecret, "the key"),
              StatusIs(absl::StatusCode::kNotFound));
}

// The attack: a world-writable token folder with world-readable tokens.
TEST(CredentialFilesTest, ALooseTokenFolderIsRefusedAtLoad) {
  ASSERT_OK_AND_ASSIGN(auto tokens, GenerateJobTokens());
  const std::string dir = ::testing::TempDir() + "/loose_tokens";
  ASSERT_OK(WriteJobTokens(tokens, dir));
  ASSERT_OK(LoadJobTokens(dir, RpcRole::kChief, /*checks_callers=*/true));

  const std::string chief = dir + "/chief.token";
  ASSERT_EQ(chmod(chief.c_str(), 0644), 0);
  EXPECT_THAT(LoadJobTokens(dir, RpcRole::kChief, true),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("the chief token"),
                             HasSubstr("chmod 600 " + chief))));
  ASSERT_EQ(chmod(chief.c_str(), 0600), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  EXPECT_THAT(LoadJobTokens(dir, RpcRole::kWorker, false),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("writable by other users")));
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  const std::string digests = dir + "/tokens.sha256";
  ASSERT_EQ(chmod(digests.c_str(), 0666), 0);
  EXPECT_THAT(LoadJobTokens(dir, RpcRole::kPs, true),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the token digests")));
}

TEST(CredentialFilesTest, AReadableTlsKeyIsRefusedAtLoad) {
  ASSERT_OK_AND_ASSIGN(PemPair ca,
                       MakeCertificateAuthority("job", absl::Hours(1)));
  ASSERT_OK_AND_ASSIGN(
      PemPair pair,
      MakeCertificate(ca, "job", "ps-0", {"127.0.0.1"}, absl::Hours(1)));
  const std::string dir = ::testing::TempDir() + "/tls";
  ASSERT_OK(MakeDirectories(dir));
  ASSERT_OK(WriteFileWithMode(dir + "/ca.crt", ca.certificate, 0644));
  ASSERT_OK(WriteFileWithMode(dir + "/ps-0.crt", pair.certificate, 0644));
  ASSERT_OK(WriteFileWithMode(dir + "/ps-0.key", pair.private_key, 0600));
  ASSERT_OK(
      LoadMutualTls(dir + "/ca.crt", dir + "/ps-0.crt", dir + "/ps-0.key"));
  ASSERT_EQ(chmod((dir + "/ps-0.key").c_str(), 0644), 0);
  EXPECT_THAT(
      LoadMutualTls(dir + "/ca.crt", dir + "/ps-0.crt", dir + "/ps-0.key"),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("the private key"), HasSubstr("chmod 600"))));
}

// The check looks where a link points too: a link in a private folder to
// a key in a folder anyone can write is a key anyone can replace.
TEST(CredentialFilesTest, ALinkIsCheckedWhereItPoints) {
  const std::string target = MakeFile("loose_target", 0777, 0600);
  const std::string dir = ::testing::TempDir() + "/private_links";
  ASSERT_OK(MakeDirectories(dir));
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  const std::string link = dir + "/ps-0.key";
  unlink(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(
      CheckCredentialFile(link, CredentialKind::kSecret, "the key"),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("links to "), HasSubstr("loose_target/file)"),
                     HasSubstr("writable by other users"))));
  // A link into a sound folder (a Kubernetes Secret volume's ..data) is
  // fine.
  const std::string sound = MakeFile("sound_target", 0755, 0600);
  unlink(link.c_str());
  ASSERT_EQ(symlink(sound.c_str(), link.c_str()), 0);
  EXPECT_OK(CheckCredentialFile(link, CredentialKind::kSecret, "the key"));
}

// Secrets go into a folder of this user's own: a new one is made 0700; one
// that exists is never chmodded (it may be /tmp) and must keep others out.
TEST(CredentialFilesTest, APrivateFolderIsNewOrAlreadyOurs) {
  const std::string fresh = ::testing::TempDir() + "/secrets/fresh";
  ASSERT_OK(MakePrivateDirectory(fresh));
  struct stat st;
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_OK(MakePrivateDirectory(fresh));  // again: ours, fine
  // A trailing "/" or "/." names the same folder, made 0700 too.
  for (const char* suffix : {"/", "/.", "//"}) {
    const std::string other =
        ::testing::TempDir() + "/secrets/slashed" + std::to_string(suffix[1]);
    ASSERT_OK(MakePrivateDirectory(other + suffix));
    ASSERT_EQ(stat(other.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u) << suffix;
  }

  const std::string shared = ::testing::TempDir() + "/shared_tmp";
  ASSERT_OK(MakeDirectories(shared));
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  EXPECT_THAT(MakePrivateDirectory(shared),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("writable by other users (mode 1777)"),
                             Not(HasSubstr("chmod")))));
  ASSERT_EQ(stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u) << "left as it was";

  const std::string readable = ::testing::TempDir() + "/readable";
  ASSERT_OK(MakeDirectories(readable));
  ASSERT_EQ(chmod(readable.c_str(), 0755), 0);
  EXPECT_OK(MakePrivateDirectory(readable));  // the files are 0600
  ASSERT_EQ(stat(readable.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);

  if (geteuid() == 0) {  // only root can give a folder away
    const std::string foreign = ::testing::TempDir() + "/foreign";
    ASSERT_OK(MakeDirectories(foreign));
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
    EXPECT_THAT(MakePrivateDirectory(foreign),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("belongs to another user (uid 65534)")));
  }
  const std::string file = ::testing::TempDir() + "/a_file";
  ASSERT_OK(WriteFileWithMode(file, "x", 0600));
  EXPECT_THAT(MakePrivateDirectory(file),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not a folder")));
}

}  // namespace
}  // namespace psflow
