// ParameterServerCore's embedding tables: creation rules, per-table
// optimizers, the memory budget shared with dense variables, and holds.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_core.h"

namespace psflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ConfigureRequest Config(UpdateMode mode = ASYNC) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  request.mutable_learning_rate()->set_learning_rate(1.0);
  request.set_mode(mode);
  request.set_num_workers(1);
  request.set_replicas_to_aggregate(1);
  return request;
}

EmbeddingTableSpec Table(const std::string& name, int dim) {
  EmbeddingTableSpec spec;
  spec.set_name(name);
  spec.set_dim(dim);
  spec.mutable_initializer()->set_kind(RowInitializerConfig::ZEROS);
  return spec;
}

CreateVariablesRequest Create(std::vector<EmbeddingTableSpec> tables,
                              const std::string& variable = "") {
  CreateVariablesRequest request;
  request.set_protocol_version(kProtocolVersion);
  for (auto& t : tables) *request.add_tables() = t;
  if (!variable.empty()) {
    VariableSpec* spec = request.add_variables();
    spec->set_name(variable);
    spec->add_shape(4);
  }
  return request;
}

absl::StatusOr<std::vector<EmbeddingTable*>> Resolve(ParameterServerCore& core,
                                                     const std::string& table,
                                                     int64_t ids) {
  PullRowsRequest request;
  RowsPart* part = request.add_parts();
  part->set_table(table);
  part->set_num_ids(ids);
  return core.ResolveRows(kProtocolVersion, request.parts());
}

TEST(PsCoreTablesTest, NamesAreUniqueAcrossVariablesAndTables) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  ASSERT_OK(core.CreateVariables(Create({Table("emb", 4)}, "dense")));
  EXPECT_THAT(core.CreateVariables(Create({Table("dense", 4)})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("'dense' exists as a dense variable")));
  EXPECT_THAT(core.CreateVariables(Create({}, "emb")),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("exists as an embedding table")));
  EXPECT_THAT(
      core.CreateVariables(Create({Table("x", 2), Table("x", 2)})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("listed twice")));
  // A bad spec creates nothing, not even the request's good parts.
  EXPECT_THAT(core.CreateVariables(
                  Create({Table("good", 2), Table("bad", 0)}, "also_good")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("embedding table 'bad': dim is 0")));
  EXPECT_THAT(Resolve(core, "good", 1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(core.Stats().num_variables(), 1);
}

// Names that become paths (a job's folders, a table's export entries) are
// checked on the server too: they arrive from the network.
TEST(PsCoreTablesTest, PathLikeJobAndTableNamesAreRefused) {
  ParameterServerCore core({});
  ConfigureRequest climbing = Config();
  climbing.set_job_name("..");
  EXPECT_THAT(
      core.Configure(climbing),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("the job name"), HasSubstr("letters, digits"))));
  ConfigureRequest named = Config();
  named.set_job_name("fashion_mnist_mlp");
  ASSERT_OK(core.Configure(named));
  for (const char* name : {"../../etc/x", "a/b", "", "tab\tname"}) {
    EXPECT_THAT(core.CreateVariables(Create({Table(name, 2)})),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("embedding table name")))
        << name;
  }
  EXPECT_EQ(core.Stats().num_variables(), 0);
}

// What a table costs beyond its rows is bounded: how many tables a server
// keeps, and how large an admission sketch may be.
TEST(PsCoreTablesTest, TableCountAndSketchSizeAreBounded) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  EmbeddingTableSpec sketchy = Table("sketchy", 2);
  sketchy.set_min_frequency(2);
  sketchy.set_admission_counters(int64_t{1} << 32);
  EXPECT_THAT(core.CreateVariables(Create({sketchy})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("use 64 to 2^26")));
  std::vector<EmbeddingTableSpec> many;
  for (int64_t i = 0; i <= kMaxTablesPerServer; ++i) {
    many.push_back(Table(absl::StrCat("t", i), 1));
  }
  EXPECT_THAT(core.CreateVariables(Create(many)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("at most 1024")));
  EXPECT_OK(core.ListTables());
}

TEST(PsCoreTablesTest, RequestsAreBounded) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  ASSERT_OK(core.CreateVariables(Create({Table("emb", 4)})));
  EXPECT_OK(Resolve(core, "emb", 1));
  EXPECT_THAT(Resolve(core, "emb", 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      Resolve(core, "emb", kMaxRowsPerRequest + 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most")));
  // Few ids of a wide table: their rows would not fit in a message, which
  // is refused before any buffer is sized by the request.
  ASSERT_OK(core.CreateVariables(Create({Table("wide", 4096)})));
  EXPECT_OK(Resolve(core, "wide", 1000));
  EXPECT_THAT(Resolve(core, "wide", kMaxRowsPerRequest),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("send fewer ids per request")));
  // Each table once per request (SYNC would drop a second part as the
  // worker's duplicate gradient).
  PullRowsRequest twice;
  for (const char* table : {"emb", "wide", "emb"}) {
    RowsPart* part = twice.add_parts();
    part->set_table(table);
    part->set_num_ids(1);
  }
  EXPECT_THAT(core.ResolveRows(kProtocolVersion, twice.parts()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("names table 'emb' twice")));
}

// A table with FTRL on a server whose optimizer is SGD keeps FTRL's slots.
TEST(PsCoreTablesTest, ATableMayHaveItsOwnOptimizer) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  EmbeddingTableSpec wide = Table("wide", 1);
  wide.mutable_optimizer()->set_kind(OptimizerConfig::FTRL);
  wide.mutable_optimizer()->set_l1(100);
  ASSERT_OK(core.CreateVariables(Create({wide, Table("emb", 2)})));
  ASSERT_OK_AND_ASSIGN(std::vector<EmbeddingTable*> tables, core.ListTables());
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0]->name(), "emb");
  EXPECT_TRUE(tables[0]->slot_names().empty());
  EXPECT_EQ(tables[1]->slot_names(),
            (std::vector<std::string>{"accumulator", "linear"}));
  EmbeddingTableSpec bad = Table("bad", 1);
  bad.mutable_optimizer()->set_kind(OptimizerConfig::FTRL);
  bad.mutable_optimizer()->set_l1(-1);
  EXPECT_THAT(
      core.CreateVariables(Create({bad})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("embedding table 'bad': optimizer: l1 is -1")));
}

// The server's rate is 1 (SGD); a table with its own rate of 0.25 moves
// its rows by a quarter of the gradient, the other table by all of it.
TEST(PsCoreTablesTest, ATableMayHaveItsOwnLearningRate) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  EmbeddingTableSpec slow = Table("slow", 2);
  slow.mutable_learning_rate()->set_learning_rate(0.25);
  ASSERT_OK(core.CreateVariables(Create({slow, Table("plain", 2)})));
  ASSERT_OK_AND_ASSIGN(std::vector<EmbeddingTable*> tables, core.ListTables());
  ASSERT_EQ(tables.size(), 2u);
  const std::vector<int64_t> ids = {7};
  const std::vector<float> gradient = {1.0f, -2.0f};
  for (EmbeddingTable* table : tables) {
    ASSERT_OK(core.PushRows({table}, {absl::MakeConstSpan(ids)},
                            {absl::MakeConstSpan(gradient)}, 0, 0)
                  .status());
  }
  std::vector<float> row(2);
  ASSERT_OK(tables[0]->Pull(ids, false, absl::MakeSpan(row)).status());
  EXPECT_EQ(tables[0]->name(), "plain");
  EXPECT_EQ(row, (std::vector<float>{-1.0f, 2.0f}));
  ASSERT_OK(tables[1]->Pull(ids, false, absl::MakeSpan(row)).status());
  EXPECT_EQ(row, (std::vector<float>{-0.25f, 0.5f}));
}

TEST(PsCoreTablesTest, ABadTableLearningRateCreatesNothing) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config()));
  EmbeddingTableSpec bad = Table("bad", 1);
  bad.mutable_learning_rate()->set_kind(LearningRateSchedule::COSINE_DECAY);
  bad.mutable_learning_rate()->set_learning_rate(0.1);
  EXPECT_THAT(core.CreateVariables(Create({Table("good", 1), bad})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("embedding table 'bad': learning_rate"),
                             HasSubstr("decay_steps is 0"))));
  EXPECT_THAT(Resolve(core, "good", 1), StatusIs(absl::StatusCode::kNotFound));
  // The same spec twice is a no-op; another rate for an existing table is
  // refused, as another optimizer is.
  EmbeddingTableSpec fast = Table("fast", 1);
  fast.mutable_learning_rate()->set_learning_rate(5);
  ASSERT_OK(core.CreateVariables(Create({fast})));
  ASSERT_OK(core.CreateVariables(Create({fast})));
  fast.mutable_learning_rate()->set_learning_rate(6);
  EXPECT_THAT(core.CreateVariables(Create({fast})),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("learning rate")));
}

TEST(PsCoreTablesTest, RowsShareTheServersMemoryBudget) {
  ParameterServerCore::Options options;
  options.max_variable_bytes = 64 * 1024;
  ParameterServerCore core(options);
  ASSERT_OK(core.Configure(Config()));
  ASSERT_OK(core.CreateVariables(Create({Table("emb", 64)})));
  ASSERT_OK_AND_ASSIGN(std::vector<EmbeddingTable*> tables,
                       Resolve(core, "emb", 1));
  // Rows of 64 floats cost about 290 bytes: 64 KiB holds about 220.
  std::vector<int64_t> ids(1000);
  for (int64_t i = 0; i < 1000; ++i) ids[i] = i;
  std::vector<float> out(ids.size() * 64);
  std::vector<absl::Span<const int64_t>> id_parts = {ids};
  std::vector<absl::Span<float>> out_parts = {absl::MakeSpan(out)};
  EXPECT_THAT(core.PullRows(tables, id_parts, true, out_parts),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("--max_variable_bytes")));
  EXPECT_LE(core.Stats().tables(0).rows() * tables[0]->bytes_per_row(),
            64 * 1024);
}

TEST(PsCoreTablesTest, ASyncHoldBoundsTablesToo) {
  ParameterServerCore core({});
  ASSERT_OK(core.Configure(Config(SYNC)));
  ASSERT_OK(core.CreateVariables(Create({Table("emb", 1)}, "dense")));
  HoldRequest hold;
  hold.set_protocol_version(kProtocolVersion);
  hold.set_action(HoldRequest::HOLD_AT);
  hold.set_step(0);
  hold.set_lease_ms(60000);
  ASSERT_OK(core.Hold(hold));
  ASSERT_OK_AND_ASSIGN(std::vector<EmbeddingTable*> tables,
                       Resolve(core, "emb", 1));
  const std::vector<int64_t> ids = {1};
  const std::vector<float> gradient = {1};
  std::vector<absl::Span<const int64_t>> id_parts = {ids};
  std::vector<absl::Span<const float>> gradient_parts = {gradient};
  ASSERT_OK(core.PushRows(tables, id_parts, gradient_parts, 0, 0));
  EXPECT_EQ(tables[0]->Version(), 0);  // held at step 0
  hold.set_action(HoldRequest::RELEASE);
  ASSERT_OK(core.Hold(hold));
  EXPECT_EQ(tables[0]->Version(), 1);
}

}  // namespace
}  // namespace psflow
