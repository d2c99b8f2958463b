// Mutual TLS end to end: `psctl local --tls` makes the job's certificates
// and trains the model to its usual accuracy with every connection on TLS;
// while it runs, psctl with the job's credentials reaches the chief, and a
// plaintext client and a client with a certificate from another CA are
// refused; afterwards no private-key bytes appear in any log or file the
// job wrote.
#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

TEST(TlsTest, ATlsJobTrainsAndStrangersAreRefused) {
  const std::string dir = TempPath("job");
  const std::string job = WriteTestFile("job.json", TestJob("SYNC", 3000));
  Subprocess local(
      LocalArgv(job, dir, {"--tls", "--ps=2", "--workers=2", "--chief"}), {},
      TempPath("local.log"));
  ASSERT_OK(local.Start());
  const std::string tf_config = dir + "/tf_config/chief-0.json";
  const std::string tls = dir + "/tls";
  const absl::Time give_up = absl::Now() + absl::Minutes(3);
  while (!(Exists(tf_config) && Exists(tls + "/psctl.key")) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Another job's certificates, for the same addresses.
  const std::string other_tls = TempPath("other");
  PsctlRun other = Psctl({"certs", "gen", "--tf_config=" + tf_config,
                          "--out=" + other_tls, "--job=other"});
  ASSERT_EQ(other.exit_code, 0) << other.output;

  const std::vector<std::string> status = {"status", "--tf_config=" + tf_config,
                                           "--timeout=3"};
  auto with = [&status](const std::string& flag) {
    std::vector<std::string> args = status;
    if (!flag.empty()) args.push_back(flag);
    return Psctl(args);
  };
  // Until the chief answers psctl's own certificate; then strangers are
  // refused while it still answers (checked again after them, so a job
  // that ended in between cannot pass for a refusal).
  bool checked = false;
  while (!checked && absl::Now() < give_up) {
    PsctlRun ours = with("--tls_dir=" + tls);
    if (ours.exit_code != 0) {
      absl::SleepFor(absl::Milliseconds(300));
      continue;
    }
    EXPECT_THAT(ours.output, HasSubstr("job test (SYNC)"));
    PsctlRun plaintext = with("");
    PsctlRun stranger = with("--tls_dir=" + other_tls);
    if (with("--tls_dir=" + tls).exit_code != 0) break;  // the job ended
    EXPECT_EQ(plaintext.exit_code, 1) << plaintext.output;
    EXPECT_THAT(plaintext.output, HasSubstr("the chief does not answer"));
    EXPECT_EQ(stranger.exit_code, 1) << stranger.output;
    EXPECT_THAT(stranger.output, HasSubstr("the chief does not answer"));
    checked = true;
  }
  EXPECT_TRUE(checked) << "the chief never answered with the job's "
                          "certificate while the job ran";

  EXPECT_THAT(local.Wait(absl::Minutes(10)), IsOkAndHolds(0)) << local.Output();
  const std::string result = ReadAll(dir + "/result.json");
  EXPECT_THAT(result, HasSubstr("\"state\": \"SUCCEEDED\"")) << result;
  EXPECT_THAT(local.Output(), HasSubstr("mutual TLS with"));
  EXPECT_THAT(local.Output(),
              ::testing::Not(HasSubstr("no transport security")));

  // No private key, or any line of one, outside the tls directory.
  std::vector<std::string> keys, files;
  ListFiles(tls, "", keys);
  ListFiles(dir, tls, files);
  ASSERT_FALSE(files.empty());
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
