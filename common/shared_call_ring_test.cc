#include "common/shared_call_ring.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/shared_call_ring_client.h"
#include "common/shared_call_ring_server.h"
#include "common/shared_memory_region.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kEcho = 1;  // answers "<method>:<request>"
constexpr uint32_t kHold = 2;  // answers when released, or when cancelled
constexpr uint32_t kFail = 3;  // answers FailedPrecondition with a payload

constexpr char kMarkerUrl[] = "type.psflow.dev/test-marker";

// A handler that echoes, fails, or holds calls until told.
class TestHandler : public SharedCallRingServer::Handler {
 public:
  std::function<void()> Serve(uint32_t method, std::string request,
                              absl::Time deadline,
                              SharedCallRingServer::Reply reply) override {
    if (method == kEcho) {
      reply(absl::OkStatus(), absl::StrCat(method, ":", request));
      return nullptr;
    }
    if (method == kFail) {
      absl::Status status =
          absl::FailedPreconditionError("refused: " + request);
      status.SetPayload(kMarkerUrl, absl::Cord("marked"));
      reply(status, "");
      return nullptr;
    }
    auto held = std::make_shared<Held>();
    {
      MutexLock lock(&held->mu);
      held->reply = std::move(reply);
    }
    held->deadline = deadline;
    {
      MutexLock lock(&mu_);
      held_.push_back(held);
    }
    return [this, held] {
      cancels_.fetch_add(1);
      // As a real service's waiting call does: past its deadline, it says
      // so; otherwise it was cancelled.
      held->Answer(absl::Now() >= held->deadline
                       ? absl::DeadlineExceededError("deadline passed")
                       : absl::CancelledError("stopped waiting"));
    };
  }
  absl::Status Closed() override {
    return absl::FailedPreconditionError("the ring is closed");
  }

  int held() {
    MutexLock lock(&mu_);
    return static_cast<int>(held_.size());
  }
  void ReleaseAll() {
    std::vector<std::shared_ptr<Held>> held;
    {
      MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (auto& h : held) h->Answer(absl::OkStatus());
  }
  int cancels() const { return cancels_.load(); }

 private:
  struct Held {
    Mutex mu;
    SharedCallRingServer::Reply reply ABSL_GUARDED_BY(mu);
    absl::Time deadline;
    void Answer(const absl::Status& status) {
      SharedCallRingServer::Reply once;
      {
        MutexLock lock(&mu);
        once.swap(reply);
      }
      if (once) once(status, "released");
    }
  };
  Mutex mu_;
  std::vector<std::shared_ptr<Held>> held_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> cancels_{0};
};

// One call's outcome, waited for.
struct Outcome {
  Notification done;
  absl::StatusOr<std::string> result;
  SharedCallRingClient::Done Callback() {
    return [this](absl::StatusOr<std::string> r) {
      result = std::move(r);
      done.Notify();
    };
  }
};

class SharedCallRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(client_region_,
                         SharedMemoryRegion::Create(kRingBytes + 4096));
    ASSERT_OK_AND_ASSIGN(
        server_region_, SharedMemoryRegion::Open(getpid(), client_region_->fd(),
                                                 client_region_->total_bytes(),
                                                 client_region_->token()));
  }
  char* ring() { return client_region_->base() + kOffset; }
  std::unique_ptr<SharedCallRingClient> NewClient(
      absl::Duration silence = absl::Seconds(15)) {
    SharedCallRingClient::Options options;
    options.server_name = "ps-0";
    options.server_silence = silence;
    return std::make_unique<SharedCallRingClient>(ring(), options);
  }
  void StartServer() {
    ASSERT_OK_AND_ASSIGN(server_, SharedCallRingServer::Start(
                                      server_region_, kOffset, handler_));
  }
  // Posts until a slot is free (the ring holds kRingSlots calls at once).
  void Post(SharedCallRingClient& client, uint32_t method,
            const std::string& request, absl::Time deadline, Outcome& out) {
    SharedCallRingClient::Done done = out.Callback();
    ASSERT_TRUE(client.Call(method, request, deadline, done));
  }

  static constexpr int64_t kOffset = kSharedMemoryHeaderBytes;
  std::unique_ptr<SharedMemoryRegion> client_region_;
  std::shared_ptr<SharedMemoryRegion> server_region_;
  std::shared_ptr<TestHandler> handler_ = std::make_shared<TestHandler>();
  std::unique_ptr<SharedCallRingServer> server_;
};

TEST_F(SharedCallRingTest, AnswersEveryCallOnceFromManyThreads) {
  auto client = NewClient();
  StartServer();
  constexpr int kThreads = 4, kCalls = 300;
  std::atomic<int> answered{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCalls; ++c) {
        const std::string request = absl::StrCat("t", t, "c", c);
        Outcome out;
        SharedCallRingClient::Done done = out.Callback();
        // All slots may be busy with the other threads' calls.
        while (!client->Call(kEcho, request, absl::InfiniteFuture(), done)) {
          std::this_thread::yield();
        }
        out.done.WaitForNotification();
        if (!out.result.ok() ||
            *out.result != absl::StrCat(kEcho, ":", request)) {
          wrong.fetch_add(1);
        }
        answered.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(answered.load(), kThreads * kCalls);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(client->calls_answered(), kThreads * kCalls);
  EXPECT_EQ(server_->calls(), kThreads * kCalls);
}

TEST_F(SharedCallRingTest, AnErrorCrossesWithItsMessageAndPayloads) {
  auto client = NewClient();
  StartServer();
  Outcome out;
  Post(*client, kFail, "because", absl::InfiniteFuture(), out);
  out.done.WaitForNotification();
  EXPECT_THAT(out.result.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("refused: because")));
  EXPECT_EQ(out.result.status().GetPayload(kMarkerUrl), absl::Cord("marked"));
}

TEST_F(SharedCallRingTest, AWaitingCallEndsAtItsDeadlineAndFreesItsSlot) {
  auto client = NewClient();
  StartServer();
  Outcome out;
  Post(*client, kHold, "", absl::Now() + absl::Milliseconds(50), out);
  out.done.WaitForNotification();
  EXPECT_THAT(out.result.status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // The server was told to stop waiting, and its answer freed the slot:
  // every slot serves again.
  std::vector<Outcome> outs(kRingSlots);
  for (int i = 0; i < kRingSlots; ++i) {
    SharedCallRingClient::Done done = outs[i].Callback();
    while (!client->Call(kEcho, "again", absl::InfiniteFuture(), done)) {
      std::this_thread::yield();
    }
  }
  for (Outcome& o : outs) {
    o.done.WaitForNotification();
    EXPECT_OK(o.result.status());
  }
  EXPECT_EQ(handler_->cancels(), 1);
}

TEST_F(SharedCallRingTest, CancelAllEndsWaitingCallsAndTellsTheServer) {
  auto client = NewClient();
  StartServer();
  Outcome a, b;
  Post(*client, kHold, "", absl::InfiniteFuture(), a);
  Post(*client, kHold, "", absl::InfiniteFuture(), b);
  while (handler_->held() < 2) std::this_thread::yield();  // both taken
  client->CancelAll();
  a.done.WaitForNotification();
  b.done.WaitForNotification();
  EXPECT_THAT(a.result.status(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(b.result.status(), StatusIs(absl::StatusCode::kCancelled));
  // Calls after the cancel go on.
  Outcome c;
  Post(*client, kEcho, "later", absl::InfiniteFuture(), c);
  c.done.WaitForNotification();
  EXPECT_OK(c.result.status());
  while (handler_->cancels() < 2) std::this_thread::yield();
}

TEST_F(SharedCallRingTest, AStoppingServerAnswersEveryCallThenClosesTheRing) {
  auto client = NewClient();
  StartServer();
  Outcome held;
  Post(*client, kHold, "", absl::InfiniteFuture(), held);
  while (handler_->held() < 1) std::this_thread::yield();
  server_.reset();
  held.done.WaitForNotification();
  EXPECT_THAT(held.result.status(), StatusIs(absl::StatusCode::kCancelled));
  // Once closed, the ring takes no more calls: the caller uses another way.
  while (client->usable()) std::this_thread::yield();
  Outcome refused;
  SharedCallRingClient::Done done = refused.Callback();
  EXPECT_FALSE(client->Call(kEcho, "x", absl::InfiniteFuture(), done));
  EXPECT_TRUE(done != nullptr);
}

TEST_F(SharedCallRingTest, ACallPostedAfterTheServerStoppedGetsClosed) {
  auto client = NewClient();
  StartServer();
  server_.reset();
  // Posted before the client saw the ring closed: taken by nobody, so the
  // client withdraws it and ends it with never_served (the caller may send
  // it another way).
  Outcome out;
  SharedCallRingClient::Done done = out.Callback();
  if (client->Call(kEcho, "late", absl::InfiniteFuture(), done)) {
    out.done.WaitForNotification();
    EXPECT_THAT(out.result.status(), StatusIs(absl::StatusCode::kUnavailable,
                                              HasSubstr("lost its server")));
    EXPECT_EQ(RingLoad(&RingSlotAt(ring(), 0)->state), kRingSlotFree);
  }
  while (client->usable()) std::this_thread::yield();
}

TEST_F(SharedCallRingTest, ACallNoServerTookIsWithdrawnAtItsDeadline) {
  auto client = NewClient();  // no server yet
  Outcome out;
  Post(*client, kEcho, "never", absl::Now() + absl::Milliseconds(20), out);
  out.done.WaitForNotification();
  EXPECT_THAT(out.result.status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // Withdrawn, not left for a server to take: one that starts now finds
  // nothing to serve in that slot.
  EXPECT_EQ(RingLoad(&RingSlotAt(ring(), 0)->state), kRingSlotFree);
  StartServer();
  Outcome next;
  Post(*client, kEcho, "now", absl::InfiniteFuture(), next);
  next.done.WaitForNotification();
  EXPECT_THAT(next.result, IsOkAndHolds(absl::StrCat(kEcho, ":now")));
  EXPECT_EQ(server_->calls(), 1);
}

TEST_F(SharedCallRingTest, CallsToASilentServerEndUnavailable) {
  auto client = NewClient(absl::Milliseconds(300));  // no server runs
  Outcome taken, untaken;
  Post(*client, kEcho, "taken", absl::InfiniteFuture(), taken);
  Post(*client, kEcho, "untaken", absl::InfiniteFuture(), untaken);
  // A server that took the first call and died.
  ASSERT_TRUE(RingExchange(&RingSlotAt(ring(), 0)->state, kRingSlotPosted,
                           kRingSlotTaken));
  taken.done.WaitForNotification();
  untaken.done.WaitForNotification();
  // The taken call may have been served: Unavailable. The other is
  // withdrawn: never_served, which says it may be sent another way.
  EXPECT_THAT(taken.result.status(), StatusIs(absl::StatusCode::kUnavailable,
                                              HasSubstr("is it alive")));
  EXPECT_THAT(untaken.result.status(), StatusIs(absl::StatusCode::kUnavailable,
                                                HasSubstr("lost its server")));
  EXPECT_EQ(RingLoad(&RingSlotAt(ring(), 1)->state), kRingSlotFree);
  EXPECT_FALSE(client->usable());
}

TEST_F(SharedCallRingTest, TheServerChecksWhatTheClientWrote) {
  // No ring written there: refused.
  EXPECT_THAT(SharedCallRingServer::Start(server_region_, kOffset, handler_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
  auto client = NewClient();
  EXPECT_THAT(
      SharedCallRingServer::Start(server_region_, kOffset + 8, handler_),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SharedCallRingServer::Start(server_region_, 0, handler_),
              StatusIs(absl::StatusCode::kInvalidArgument));
  StartServer();
  // A slot that claims more request bytes than it holds.
  RingSlot* slot = RingSlotAt(ring(), kRingSlots - 1);
  slot->request_bytes = kRingRequestBytes + 1;
  RingStore(&slot->state, kRingSlotPosted);
  RingBell(&RingHeaderAt(ring())->server_bell);
  while (RingLoad(&slot->state) != kRingSlotDone) std::this_thread::yield();
  EXPECT_THAT(
      DecodeRingStatus(slot->code,
                       absl::string_view(RingAnswerAt(ring(), kRingSlots - 1),
                                         slot->answer_bytes)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most")));
  RingStore(&slot->state, kRingSlotFree);
}

TEST_F(SharedCallRingTest, ASlotRepostedWhileServedIsNotTakenTwice) {
  auto client = NewClient();
  StartServer();
  Outcome out;
  Post(*client, kHold, "", absl::InfiniteFuture(), out);
  while (handler_->held() < 1) std::this_thread::yield();
  // A misbehaving client flips the slot it posted back to POSTED.
  RingSlot* slot = RingSlotAt(ring(), 0);
  RingStore(&slot->state, kRingSlotPosted);
  RingBell(&RingHeaderAt(ring())->server_bell);
  Outcome probe;
  Post(*client, kEcho, "probe", absl::InfiniteFuture(), probe);
  probe.done.WaitForNotification();  // the server looked at the ring again
  EXPECT_EQ(handler_->held(), 1);
  handler_->ReleaseAll();
  out.done.WaitForNotification();
  EXPECT_OK(out.result.status());
}

TEST(SharedCallRingAcrossProcessesTest, AForkedServerAnswersThroughTheRing) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SharedMemoryRegion> region,
                       SharedMemoryRegion::Create(kRingBytes + 4096));
  const int64_t offset = kSharedMemoryHeaderBytes;
  char* ring = region->base() + offset;
  // Written before the fork so that the child finds it.
  RingHeaderAt(ring)->magic = kRingMagic;
  RingHeaderAt(ring)->slots = kRingSlots;
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(to_child[1]);
    auto opened = SharedMemoryRegion::Open(
        parent, region->fd(), region->total_bytes(), region->token());
    if (!opened.ok()) _exit(2);
    auto server = SharedCallRingServer::Start(
        std::shared_ptr<SharedMemoryRegion>(*std::move(opened)), offset,
        std::make_shared<TestHandler>());
    if (!server.ok()) _exit(3);
    char byte;
    (void)read(to_child[0], &byte, 1);  // until the parent is done
    server->reset();
    _exit(0);
  }
  close(to_child[0]);
  {
    SharedCallRingClient::Options options;
    options.server_name = "the child";
    // The client rewrites the header, as a real one does before it offers
    // the ring; the child reads it only after Start.
    SharedCallRingClient client(ring, options);
    for (int i = 0; i < 100; ++i) {
      Outcome out;
      SharedCallRingClient::Done done = out.Callback();
      while (
          !client.Call(kEcho, absl::StrCat(i), absl::InfiniteFuture(), done)) {
        std::this_thread::yield();
      }
      out.done.WaitForNotification();
      ASSERT_THAT(out.result, IsOkAndHolds(absl::StrCat(kEcho, ":", i)));
    }
    close(to_child[1]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    // The child closed the ring as it stopped.
    while (client.usable()) std::this_thread::yield();
  }
}

TEST_F(SharedCallRingTest, AChildClosingItsCopyOfTheRegionIsNotTheServer) {
  SharedCallRingClient::Options options;
  options.server_name = "ps-0";
  options.region_fd = client_region_->fd();
  SharedCallRingClient client(ring(), options);
  StartServer();
  // Another process of this user opens the region and closes it again
  // (a close of its own, as a server's), while the server lives on and
  // heartbeats.
  const std::string path =
      absl::StrCat("/proc/", getpid(), "/fd/", client_region_->fd());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int opened = open(path.c_str(), O_RDWR);
    if (opened < 0) _exit(2);
    close(opened);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Well past the silence a close must be followed by to count.
  const absl::Time until = absl::Now() + 3 * absl::Seconds(1);
  while (absl::Now() < until) {
    Outcome out;
    Post(client, kEcho, "alive", absl::InfiniteFuture(), out);
    out.done.WaitForNotification();
    ASSERT_OK(out.result.status());
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(client.usable());
}

// A server process that dies (here: the moment it takes a call) is
// noticed at once, by its descriptor of the region closing, not after the
// heartbeat's silence (an hour here).
class DieOnCall : public SharedCallRingServer::Handler {
 public:
  std::function<void()> Serve(uint32_t, std::string, absl::Time,
                              SharedCallRingServer::Reply) override {
    _exit(0);
  }
  absl::Status Closed() override { return absl::OkStatus(); }
};

TEST(SharedCallRingAcrossProcessesTest, AServerProcessThatDiesIsNoticedAtOnce) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SharedMemoryRegion> region,
                       SharedMemoryRegion::Create(kRingBytes + 4096));
  const int64_t offset = kSharedMemoryHeaderBytes;
  char* ring = region->base() + offset;
  SharedCallRingClient::Options options;
  options.server_name = "the child";
  options.server_silence = absl::Hours(1);
  options.region_fd = region->fd();
  // Forked while this process has one thread (the client starts one); the
  // child serves once the client wrote its ring.
  int ring_written[2];
  ASSERT_EQ(pipe(ring_written), 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ring_written[1]);
    char byte;
    if (read(ring_written[0], &byte, 1) != 1) _exit(5);
    auto opened = SharedMemoryRegion::Open(
        parent, region->fd(), region->total_bytes(), region->token());
    if (!opened.ok()) _exit(2);
    auto server = SharedCallRingServer::Start(
        std::shared_ptr<SharedMemoryRegion>(*std::move(opened)), offset,
        std::make_shared<DieOnCall>());
    if (!server.ok()) _exit(3);
    pause();  // until the call kills it
    _exit(4);
  }
  close(ring_written[0]);
  SharedCallRingClient client(ring, options);
  ASSERT_EQ(write(ring_written[1], "w", 1), 1);
  close(ring_written[1]);
  Outcome out;
  SharedCallRingClient::Done done = out.Callback();
  ASSERT_TRUE(client.Call(kEcho, "fatal", absl::InfiniteFuture(), done));
  out.done.WaitForNotification();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Taken, then the server died: it may have been served.
  EXPECT_THAT(out.result.status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("let go of our shared memory")));
  EXPECT_FALSE(client.usable());
}

}  // namespace
}  // namespace psflow
