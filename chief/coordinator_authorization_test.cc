// Least privilege on the chief's Coordinator over gRPC, with the job's
// tokens: tasks register as their own role only, workers report
// progress, the evaluator reports evaluations, only an admin tool
// (psctl) restores a checkpoint, and callers without the job's token are
// refused.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "chief/coordinator_service.h"
#include "chief/job_coordinator.h"
#include "client/grpc_coordinator_client.h"
#include "common/rpc/job_tokens.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

class CoordinatorAuthorizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(tokens_, GenerateJobTokens());
    const std::string dir = absl::StrCat(::testing::TempDir(), "/tokens");
    ASSERT_OK(WriteJobTokens(tokens_, dir));
    JobCoordinator::Options options;
    options.num_workers = 1;
    options.worker_addresses = {{0, "h0:1"}};
    options.evaluator_address = "h9:1";
    coordinator_ = std::make_unique<JobCoordinator>(options);
    JobSpec spec;
    spec.set_total_steps(100);
    spec.mutable_config()->mutable_training()->set_mode(ASYNC);
    coordinator_->SetSpec(spec);
    TransportSecurity security;
    ASSERT_OK_AND_ASSIGN(security.tokens,
                         LoadJobTokens(dir, RpcRole::kChief, true));
    ASSERT_OK_AND_ASSIGN(
        server_,
        CoordinatorServer::Start("127.0.0.1:0", security, coordinator_.get()));
  }

  std::unique_ptr<GrpcCoordinatorClient> Client(const std::string& token) {
    TransportSecurity security;
    security.tokens.own = token;
    return std::make_unique<GrpcCoordinatorClient>(
        absl::StrCat("127.0.0.1:", server_->port()), "chief-0", security);
  }
  std::unique_ptr<GrpcCoordinatorClient> As(RpcRole role) {
    return Client(tokens_.at(role));
  }
  static absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

  std::map<RpcRole, std::string> tokens_;
  std::unique_ptr<JobCoordinator> coordinator_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(CoordinatorAuthorizationTest, TasksRegisterAsTheirOwnRoleOnly) {
  auto worker = As(RpcRole::kWorker);
  EXPECT_OK(worker->Register(TaskId{TaskType::kWorker, 0}, 1, Soon()));
  EXPECT_THAT(worker->Register(TaskId{TaskType::kEvaluator, 0}, 1, Soon()),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("a worker cannot register as task type "
                                 "\"evaluator\"")));
  auto evaluator = As(RpcRole::kEvaluator);
  EXPECT_OK(evaluator->Register(TaskId{TaskType::kEvaluator, 0}, 1, Soon()));
  EXPECT_THAT(evaluator->Register(TaskId{TaskType::kWorker, 0}, 1, Soon()),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // An admin tool is no task.
  EXPECT_THAT(
      As(RpcRole::kAdmin)->Register(TaskId{TaskType::kWorker, 0}, 1, Soon()),
      StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(CoordinatorAuthorizationTest, OnlyAnAdminToolRestoresACheckpoint) {
  for (RpcRole role : {RpcRole::kWorker, RpcRole::kEvaluator}) {
    EXPECT_THAT(As(role)->RestoreCheckpoint("/ckpt/ckpt-1", absl::Seconds(30)),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("RestoreCheckpoint is for an admin tool "
                                   "(psctl) only")))
        << RpcRoleName(role);
  }
  EvaluationReport report;
  EXPECT_THAT(As(RpcRole::kWorker)->ReportEvaluation(report, absl::Seconds(30)),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ProgressReport progress;
  EXPECT_THAT(
      As(RpcRole::kEvaluator)->ReportProgress(progress, absl::Seconds(30)),
      StatusIs(absl::StatusCode::kPermissionDenied));
  // Everyone of the job may look.
  for (RpcRole role : kCallingRoles) {
    EXPECT_OK(As(role)->DescribeJob(absl::Seconds(30)).status())
        << RpcRoleName(role);
  }
}

TEST_F(CoordinatorAuthorizationTest, CallersWithoutTheJobsTokenAreRefused) {
  ASSERT_OK_AND_ASSIGN(auto others, GenerateJobTokens());
  for (const std::string& token :
       {std::string(), others.at(RpcRole::kWorker)}) {
    auto stranger = Client(token);
    EXPECT_THAT(
        stranger->Register(TaskId{TaskType::kWorker, 0}, 1, Soon()),
        StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("--token_dir")));
    EXPECT_THAT(stranger->DescribeJob(absl::Seconds(30)).status(),
                StatusIs(absl::StatusCode::kUnauthenticated));
  }
  // Nobody registered.
  JobDescription job = coordinator_->Describe();
  for (const TaskView& task : job.tasks()) {
    if (task.task() == "worker-0" || task.task() == "evaluator-0") {
      EXPECT_EQ(task.state(), TaskView::MISSING) << task.task();
    }
  }
}

// Requests to the chief are small; gRPC parses one before its caller is
// checked, so anything far larger is refused by its size first.
TEST_F(CoordinatorAuthorizationTest, OversizedRequestsAreRefusedByTheirSize) {
  std::unique_ptr<Coordinator::Stub> stub = Coordinator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                          grpc::InsecureChannelCredentials()));
  StatusRequest bloated;
  bloated.GetReflection()->MutableUnknownFields(&bloated)->AddLengthDelimited(
      1000, std::string(2 << 20, 'x'));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(Soon()));
  StatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, bloated, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  // Still answering callers of the job.
  EXPECT_OK(As(RpcRole::kWorker)->DescribeJob(absl::Seconds(30)).status());
}

}  // namespace
}  // namespace psflow
