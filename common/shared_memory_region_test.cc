#include "common/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kData = 1 << 16;

TEST(SharedMemoryRegionTest, OpenedRegionSharesBytesWithItsCreator) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SharedMemoryRegion> created,
                       SharedMemoryRegion::Create(kData));
  EXPECT_EQ(created->total_bytes(), kSharedMemoryHeaderBytes + kData);
  EXPECT_EQ(created->token().size(), 32u);
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<SharedMemoryRegion> opened,
      SharedMemoryRegion::Open(getpid(), created->fd(), created->total_bytes(),
                               created->token()));
  // Two mappings of one memory: a write through either shows in the other.
  std::strcpy(created->base() + kSharedMemoryHeaderBytes, "from the client");
  EXPECT_STREQ(opened->base() + kSharedMemoryHeaderBytes, "from the client");
  opened->base()[created->total_bytes() - 1] = 'z';
  EXPECT_EQ(created->base()[created->total_bytes() - 1], 'z');
}

TEST(SharedMemoryRegionTest, OnlyItsOwnerMayOpenTheRegion) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SharedMemoryRegion> created,
                       SharedMemoryRegion::Create(kData));
  struct stat info;
  ASSERT_EQ(fstat(created->fd(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  EXPECT_EQ(info.st_uid, geteuid());
}

TEST(SharedMemoryRegionTest, TokensDiffer) {
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  ASSERT_OK_AND_ASSIGN(auto b, SharedMemoryRegion::Create(kData));
  EXPECT_NE(a->token(), b->token());
}

TEST(SharedMemoryRegionTest, CreateRejectsBadSizes) {
  EXPECT_THAT(SharedMemoryRegion::Create(0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SharedMemoryRegion::Create(100),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("multiple of 64")));
}

TEST(SharedMemoryRegionTest, OpenRejectsAnotherRegionsToken) {
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  ASSERT_OK_AND_ASSIGN(auto b, SharedMemoryRegion::Create(kData));
  EXPECT_THAT(
      SharedMemoryRegion::Open(getpid(), a->fd(), a->total_bytes(), b->token()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("not the client's shared memory")));
}

TEST(SharedMemoryRegionTest, OpenRejectsAWrongSize) {
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  EXPECT_THAT(SharedMemoryRegion::Open(getpid(), a->fd(),
                                       a->total_bytes() + 4096, a->token()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not a region of")));
}

TEST(SharedMemoryRegionTest, OpenNeverOpensAnUnrelatedFile) {
  // A descriptor number that, on "another host", names some other file.
  char path[] = "/tmp/psflow_shm_test_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  EXPECT_THAT(
      SharedMemoryRegion::Open(getpid(), fd, a->total_bytes(), a->token()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("another host")));
  close(fd);
}

TEST(SharedMemoryRegionTest, OpenRejectsAMissingProcess) {
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  // Above the kernel's pid_max (at most 2^22).
  EXPECT_THAT(SharedMemoryRegion::Open((1 << 22) + 7, a->fd(), a->total_bytes(),
                                       a->token()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("another host")));
}

TEST(SharedMemoryRegionTest, OpenRejectsAnUnsealedRegion) {
  // Named like a client's region, with its header, but resizable: mapping
  // it would let the client shrink it under the server (SIGBUS).
  const std::string token(32, 'a');
  const int fd = memfd_create(("psflow-" + token).c_str(), MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const int64_t total = kSharedMemoryHeaderBytes + kData;
  ASSERT_EQ(ftruncate(fd, total), 0);
  EXPECT_THAT(
      SharedMemoryRegion::Open(getpid(), fd, total, token),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not sealed")));
  close(fd);
}

// A client may shrink its file and seal it while the server opens it:
// whatever the timing, an opened region is never larger than its file
// (mapping past the file's end faults the server on first use).
TEST(SharedMemoryRegionTest, AShrinkRacingTheOpenIsNeverAccepted) {
  const std::string token(32, 'r');
  const int64_t total = kSharedMemoryHeaderBytes + (1 << 20);
  int accepted_short = 0;
  for (int attempt = 0; attempt < 5000 && accepted_short == 0; ++attempt) {
    const int fd = memfd_create(("psflow-" + token).c_str(),
                                MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fchmod(fd, 0600), 0);
    ASSERT_EQ(ftruncate(fd, total), 0);
    char header[64] = "psflow shared memory v1";
    std::memcpy(header + 32, token.data(), token.size());
    ASSERT_EQ(pwrite(fd, header, sizeof(header), 0), 64);
    std::atomic<bool> go{false};
    const int spin = (attempt * 7919) % 4000;  // spread over Open's steps
    std::thread client([&] {
      while (!go.load()) {
      }
      for (volatile int i = 0; i < spin; i = i + 1) {
      }
      (void)!ftruncate(fd, 4096);
      (void)!fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    });
    go.store(true);
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
        SharedMemoryRegion::Open(getpid(), fd, total, token);
    client.join();
    struct stat info;
    ASSERT_EQ(fstat(fd, &info), 0);
    if (region.ok() && info.st_size < total) ++accepted_short;
    region = absl::CancelledError();  // unmaps before the file goes
    close(fd);
  }
  EXPECT_EQ(accepted_short, 0);
}

TEST(SharedMemoryRegionTest, OpenRejectsMalformedReferences) {
  ASSERT_OK_AND_ASSIGN(auto a, SharedMemoryRegion::Create(kData));
  EXPECT_THAT(
      SharedMemoryRegion::Open(0, a->fd(), a->total_bytes(), a->token()),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      SharedMemoryRegion::Open(getpid(), a->fd(), a->total_bytes(), "short"),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

// A region another user's process made is refused, even by a root server
// that could read it. Needs root to make a process of another user.
TEST(SharedMemoryRegionTest, OpenRefusesAnotherUsersRegion) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as nobody";
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As nobody: make a region, tell the parent where it is, wait until
    // the parent closes its end of `done`.
    close(ready[0]);
    close(done[1]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> region =
        SharedMemoryRegion::Create(kData);
    if (!region.ok()) _exit(3);
    const std::string message =
        absl::StrCat((*region)->fd(), " ", (*region)->total_bytes(), " ",
                     (*region)->token());
    (void)!write(ready[1], message.data(), message.size());
    close(ready[1]);
    char byte;
    (void)!read(done[0], &byte, 1);
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char buffer[256] = {};
  const ssize_t n = read(ready[0], buffer, sizeof(buffer) - 1);
  ASSERT_GT(n, 0);
  int fd = -1;
  long long total = 0;
  char token[64] = {};
  ASSERT_EQ(sscanf(buffer, "%d %lld %63s", &fd, &total, token), 3);
  EXPECT_THAT(SharedMemoryRegion::Open(child, fd, total, token),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("belongs to uid 65534")));
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace psflow
