// A secure job end to end: `psctl local` (TLS and job tokens by default)
// makes the job's certificates and tokens and trains the model with every
// connection on TLS and every call carrying its role's token; while it
// runs, psctl with the job's credentials reaches the chief, and a
// plaintext client, a client with a certificate from another CA, a client
// without the token and a client with another job's token are refused;
// afterwards no private-key or token bytes appear in any log or file the
// job wrote.
#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow {
namespace {

using ::psflow::testing::LocalArgv;
using ::psflow::testing::RunfilePath;
using ::psflow::testing::TempPath;
using ::psflow::testing::TestJob;
using ::psflow::testing::WriteTestFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct PsctlRun {
  int exit_code = -1;
  std::string output;
};

PsctlRun Psctl(std::vector<std::string> args) {
  static int runs = 0;
  args.insert(args.begin(), RunfilePath("client/psctl/psctl"));
  Subprocess psctl(args, {}, TempPath(absl::StrCat("psctl", ++runs, ".log")));
  EXPECT_OK(psctl.Start());
  absl::StatusOr<int> code = psctl.Wait(absl::Seconds(60));
  EXPECT_OK(code);
  return PsctlRun{code.ok() ? *code : -1, psctl.Output()};
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every regular file under `dir`, except under `skip`.
void ListFiles(const std::string& dir, const std::string& skip,
               std::vector<std::string>& out) {
  if (dir == skip) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      ListFiles(path, skip, out);
    } else if (S_ISREG(st.st_mode)) {
      out.push_back(path);
    }
  }
  closedir(d);
}

TEST(SecurityTest, ASecureJobTrainsAndStrangersAreRefused) {
  const std::string dir = TempPath("job");
  const std::string job = WriteTestFile("job.json", TestJob("SYNC", 3000));
  // TLS and tokens are psctl local's defaults.
  Subprocess local(LocalArgv(job, dir, {"--ps=2", "--workers=2", "--chief"}),
                   {}, TempPath("local.log"));
  ASSERT_OK(local.Start());
  const std::string tf_config = dir + "/tf_config/chief-0.json";
  const std::string tls = dir + "/tls";
  const std::string tokens = dir + "/tokens";
  const absl::Time give_up = absl::Now() + absl::Minutes(3);
  while (!(Exists(tf_config) && Exists(tls + "/psctl.key") &&
           Exists(tokens + "/tokens.sha256")) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Another job's certificates, for the same addresses, and tokens.
  const std::string other_tls = TempPath("other");
  PsctlRun other = Psctl({"certs", "gen", "--tf_config=" + tf_config,
                          "--out=" + other_tls, "--job=other"});
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const std::string other_tokens = TempPath("other_tokens");
  other = Psctl({"tokens", "gen", "--out=" + other_tokens});
  ASSERT_EQ(other.exit_code, 0) << other.output;

  const std::vector<std::string> status = {"status", "--tf_config=" + tf_config,
                                           "--timeout=20"};
  auto with = [&status](std::vector<std::string> flags) {
    std::vector<std::string> args = status;
    args.insert(args.end(), flags.begin(), flags.end());
    return Psctl(args);
  };
  const std::vector<std::string> ours_flags = {"--tls_dir=" + tls,
                                               "--token_dir=" + tokens};
  // psctl ckpt restore as the README writes it, into the running secure
  // job: the credentials are found beside the TF_CONFIG. The chief saves a
  // checkpoint of step 0 before training.
  std::string initial;
  while (initial.empty() && absl::Now() < give_up) {
    if (DIR* d = opendir((dir + "/checkpoints").c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("ckpt-", 0) == 0) initial = dir + "/checkpoints/" + name;
      }
      closedir(d);
    }
    if (initial.empty()) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_FALSE(initial.empty()) << "no checkpoint appeared";
  while (with(ours_flags).exit_code != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(300));
  }
  // Early, so the job is surely still running; it trains from step 0
  // again afterwards, which leaves the checks below time too.
  PsctlRun restore =
      Psctl({"ckpt", "restore", initial, "--tf_config=" + tf_config});
  EXPECT_EQ(restore.exit_code, 0) << restore.output;
  EXPECT_THAT(restore.output,
              AllOf(HasSubstr("using the job's credentials beside"),
                    HasSubstr("restored " + initial)));

  // Until the chief answers psctl's own credentials; then strangers are
  // refused while it still answers (checked again after them, so a job
  // that ended in between cannot pass for a refusal).
  bool checked = false;
  while (!checked && absl::Now() < give_up) {
    PsctlRun ours = with(ours_flags);
    if (ours.exit_code != 0) {
      absl::SleepFor(absl::Milliseconds(300));
      continue;
    }
    EXPECT_THAT(ours.output, HasSubstr("job test (SYNC)"));
    // As the README shows it, without credential flags: psctl finds the
    // job's tls/ and tokens/ beside its TF_CONFIG folder.
    PsctlRun as_documented = with({});
    PsctlRun plaintext = with({"--token_dir=" + tokens});
    PsctlRun stranger =
        with({"--tls_dir=" + other_tls, "--token_dir=" + tokens});
    PsctlRun no_token = with({"--tls_dir=" + tls});
    PsctlRun wrong_token =
        with({"--tls_dir=" + tls, "--token_dir=" + other_tokens});
    if (with(ours_flags).exit_code != 0) break;  // the job ended
    EXPECT_EQ(as_documented.exit_code, 0) << as_documented.output;
    EXPECT_THAT(as_documented.output,
                AllOf(HasSubstr("using the job's credentials beside"),
                      HasSubstr("job test (SYNC)")));
    EXPECT_EQ(plaintext.exit_code, 1) << plaintext.output;
    EXPECT_THAT(plaintext.output, HasSubstr("the chief does not answer"));
    // Not "Socket closed" alone: which flags would get in.
    EXPECT_THAT(plaintext.output, HasSubstr("--tls_dir=<the job's tls"));
    EXPECT_EQ(stranger.exit_code, 1) << stranger.output;
    EXPECT_THAT(stranger.output, HasSubstr("the chief does not answer"));
    EXPECT_EQ(no_token.exit_code, 1) << no_token.output;
    EXPECT_THAT(no_token.output, HasSubstr("the chief refused psctl"));
    EXPECT_THAT(no_token.output, HasSubstr("carries no job token"));
    EXPECT_THAT(no_token.output, HasSubstr("--token_dir"));
    EXPECT_EQ(wrong_token.exit_code, 1) << wrong_token.output;
    EXPECT_THAT(wrong_token.output, HasSubstr("not one of this job's"));
    checked = true;
  }
  EXPECT_TRUE(checked) << "the chief never answered with the job's "
                          "certificate while the job ran";

  EXPECT_THAT(local.Wait(absl::Minutes(10)), IsOkAndHolds(0)) << local.Output();
  const std::string result = ReadAll(dir + "/result.json");
  EXPECT_THAT(result, HasSubstr("\"state\": \"SUCCEEDED\"")) << result;
  EXPECT_THAT(local.Output(), HasSubstr("mutual TLS with"));
  EXPECT_THAT(local.Output(), HasSubstr("job tokens from"));
  EXPECT_THAT(local.Output(),
              ::testing::Not(HasSubstr("no transport security")));

  // No private key, or any line of one, outside the tls directory, and no
  // token outside the tokens directory.
  std::vector<std::string> keys, files, token_files;
  ListFiles(tls, "", keys);
  ListFiles(tokens, "", token_files);
  std::vector<std::string> all;
  ListFiles(dir, tls, all);
  for (const std::string& file : all) {
    if (file.rfind(tokens + "/", 0) != 0) files.push_back(file);
  }
  ASSERT_FALSE(files.empty());
  int tokens_checked = 0;
  for (const std::string& token_file : token_files) {
    if (token_file.size() < 6 ||
        token_file.substr(token_file.size() - 6) != ".token") {
      continue;
    }
    const std::string token =
        std::string(absl::StripAsciiWhitespace(ReadAll(token_file)));
    ASSERT_EQ(token.size(), 64u) << token_file;
    ++tokens_checked;
    for (const std::string& file : files) {
      EXPECT_EQ(ReadAll(file).find(token), std::string::npos)
          << file << " holds the token of " << token_file;
    }
  }
  EXPECT_EQ(tokens_checked, 4);
  for (const std::string& key : keys) {
    if (key.size() < 4 || key.substr(key.size() - 4) != ".key") continue;
    for (absl::string_view line : absl::StrSplit(ReadAll(key), '\n')) {
      if (line.size() < 20 || line.find("-----") == 0) continue;
      for (const std::string& file : files) {
        EXPECT_EQ(ReadAll(file).find(std::string(line)), std::string::npos)
            << file << " holds bytes of " << key;
      }
    }
  }
}

}  // namespace
}  // namespace psflow
