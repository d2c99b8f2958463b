// deploy/grafana/psflow.json against a running job: every query of the
// dashboard reads only metrics the job's tasks export, and, through a real
// Prometheus (Debian's `prometheus`) scraping the job, every query parses
// and returns series. The job (`psctl local --chief --metrics`: a chief, a
// parameter server, 2 workers through shared memory and an evaluator)
// runs until the test stops it; every wait is for what the endpoints or
// Prometheus report, bounded only against a hung run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "common/free_port.h"
#include "common/json.h"
#include "common/status_matchers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/dashboard_queries.h"
#include "tests/local_run.h"
#include "tests/test_paths.h"

namespace psflow::testing {
namespace {

// A bound on a hung run, not a speed requirement.
constexpr absl::Duration kDeadline = absl::Minutes(5);
// The job's name in TestJob, so $psflow_job's value.
constexpr char kJobName[] = "test";
// Series Prometheus makes itself for every target.
const std::set<std::string> kPrometheusSeries = {"up"};
// Grafana's own variables, and the values the test gives them:
// Prometheus scrapes every second here, and a rate window holds several
// scrapes, as Grafana's $__rate_interval would.
const std::map<std::string, std::string> kBuiltinVariables = {
    {"__rate_interval", "10s"}, {"__interval", "1s"}, {"__range", "5m"}};
// Each task's latest scrape time, for the tasks that are up and have at
// least 3 scrapes in the rate window, so every rate() has data.
constexpr char kReadyExpr[] =
    "timestamp(up{job=\"psflow\"} == 1) and "
    "count_over_time(up{job=\"psflow\"}[10s]) >= 3";

// What the dashboard shows, each seen at least once before its queries
// are checked: steps on both workers, traffic through shared memory, a
// scheduled checkpoint beside the initial one, an evaluation.
struct Milestone {
  const char* task;
  const char* metric;
  const char* labels;  // a substring of the sample's label set, or ""
  double at_least;
};
constexpr Milestone kMilestones[] = {
    {"worker-0", "psflow_worker_steps_total", "", 1},
    {"worker-1", "psflow_worker_steps_total", "", 1},
    {"ps-0", "psflow_ps_shared_memory_sessions", "", 1},
    {"ps-0", "psflow_ps_transferred_bytes_total", "transport=\"shared_memory\"",
     1},
    {"chief-0", "psflow_chief_checkpoints_total", "outcome=\"saved\"", 2},
    {"evaluator-0", "psflow_evaluator_evaluations_total", "", 1},
};

// The sum of the samples of `metric` in an exposition whose label set
// contains `labels`.
double SampleSum(absl::string_view exposition, absl::string_view metric,
                 absl::string_view labels) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, metric) || line.size() == metric.size() ||
        (line[metric.size()] != '{' && line[metric.size()] != ' ') ||
        !absl::StrContains(line, labels)) {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
      sum += value;
    }
  }
  return sum;
}

JsonValue ReadDashboard() {
  absl::StatusOr<std::string> text =
      ReadFileToString(RunfilePath("deploy/grafana/psflow.json"));
  EXPECT_OK(text);
  absl::StatusOr<JsonValue> dashboard = ParseJson(text.ok() ? *text : "");
  EXPECT_OK(dashboard);
  return dashboard.ok() ? *std::move(dashboard) : JsonValue();
}

struct HttpAnswer {
  int code = 0;
  std::string body;
};

// GET http://127.0.0.1:<port><path> over HTTP/1.0 (the server closes
// after one answer and sends no chunked encoding).
absl::StatusOr<HttpAnswer> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  // Every wait has a timeout: a stuck server fails the request.
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("nothing listens on ", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("send to ", port, " failed"));
  }
  std::string answer;
  char buffer[65536];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0)
    answer.append(buffer, n);
  close(fd);
  if (n < 0) {
    return absl::UnavailableError(absl::StrCat("no answer from ", port));
  }
  const size_t head_end = answer.find("\r\n\r\n");
  HttpAnswer out;
  if (head_end == std::string::npos ||
      sscanf(answer.c_str(), "HTTP/%*s %d", &out.code) != 1) {
    return absl::UnavailableError(
        absl::StrCat("not an HTTP answer from ", port, ": ", answer));
  }
  out.body = answer.substr(head_end + 4);
  return out;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// One task's metrics endpoint, from psctl's file_sd targets file.
struct Target {
  std::string task;  // "worker-1"
  int port = 0;
};

// Each task's exposition, by task ("worker-1").
using Scrapes = std::map<std::string, std::string>;

// kReadyExpr's answer, by instance, once it lists every one of
// `num_targets` and each was scraped after its time in `previous`;
// Unavailable before.
absl::StatusOr<std::map<std::string, double>> ScrapeTimes(
    int port, size_t num_targets,
    const std::map<std::string, double>& previous) {
  absl::StatusOr<HttpAnswer> answer = HttpGet(
      port, absl::StrCat("/api/v1/query?query=", UrlEncode(kReadyExpr)));
  if (!answer.ok()) return answer.status();  // still starting
  absl::StatusOr<JsonValue> json = ParseJson(answer->body);
  if (!json.ok()) return json.status();
  const JsonValue* data = json->Find("data");
  const JsonValue* result = data == nullptr ? nullptr : data->Find("result");
  if (result == nullptr || result->kind() != JsonValue::Kind::kArray) {
    return absl::UnavailableError(answer->body);
  }
  std::map<std::string, double> times;
  for (const JsonValue& series : result->array()) {
    const JsonValue* metric = series.Find("metric");
    const JsonValue* instance =
        metric == nullptr ? nullptr : metric->Find("instance");
    const JsonValue* value = series.Find("value");
    double time = 0;
    if (instance == nullptr || instance->kind() != JsonValue::Kind::kString ||
        value == nullptr || value->kind() != JsonValue::Kind::kArray ||
        value->array().size() != 2 ||
        value->array()[1].kind() != JsonValue::Kind::kString ||
        !absl::SimpleAtod(value->array()[1].string_value(), &time)) {
      return absl::UnavailableError(answer->body);
    }
    auto before = previous.find(instance->string_value());
    if (before != previous.end() && time <= before->second) {
      return absl::UnavailableError("no newer scrape yet");
    }
    times[instance->string_value()] = time;
  }
  if (times.size() != num_targets) {
    return absl::UnavailableError(answer->body);
  }
  return times;
}

// A running `psctl local --chief --metrics` job, shared by the tests.
class GrafanaDashboardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string job = WriteTestFile(
        "job.json",
        TestJob(
            "ASYNC", 10000000,
            // The evaluator scores each new checkpoint: save often.
            R"("checkpoint": {"save_every_steps": 300, "max_to_keep": 2})"));
    dir_ = new std::string(TempPath("job"));
    psctl_ = new Subprocess(
        LocalArgv(job, *dir_,
                  {"--ps=1", "--workers=2", "--chief", "--metrics"}),
        {}, TempPath("psctl.log"));
    ASSERT_OK(psctl_->Start());
    const std::string targets_file = *dir_ + "/prometheus_targets.json";
    const absl::Time give_up = absl::Now() + kDeadline;
    while (!PathExists(targets_file)) {
      ASSERT_FALSE(psctl_->Exited()) << psctl_->Output();
      ASSERT_LT(absl::Now(), give_up) << "no targets file\n"
                                      << psctl_->Output();
      absl::SleepFor(absl::Milliseconds(100));
    }
    // Written atomically: whole once it exists.
    ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(targets_file));
    ASSERT_OK_AND_ASSIGN(JsonValue targets, ParseJson(text));
    targets_ = new std::vector<Target>();
    for (const JsonValue& group : targets.array()) {
      const std::string address =
          group.Find("targets")->array()[0].string_value();
      Target target;
      target.task = group.Find("labels")->Find("task")->string_value();
      target.port = std::stoi(address.substr(address.rfind(':') + 1));
      targets_->push_back(target);
    }
  }

  static void TearDownTestSuite() {
    if (psctl_ != nullptr && !psctl_->Exited()) {
      psctl_->Signal(SIGINT);
      // Bounded: the destructor SIGKILLs what is left.
      EXPECT_OK(psctl_->Wait(absl::Seconds(60)));
    }
    delete psctl_;
    delete targets_;
    delete dir_;
    psctl_ = nullptr;
    targets_ = nullptr;
    dir_ = nullptr;
  }

  // Every task's exposition, once they show every kMilestones entry.
  // DeadlineExceeded naming those still missing after kDeadline (a hung
  // job); FailedPrecondition when the job ended.
  static absl::StatusOr<Scrapes> ScrapeOnceEverythingHappened() {
    const absl::Time give_up = absl::Now() + kDeadline;
    while (true) {
      if (psctl_->Exited()) {
        return absl::FailedPreconditionError("the job ended\n" +
                                             psctl_->Output());
      }
      Scrapes scrapes;
      for (const Target& target : *targets_) {
        absl::StatusOr<HttpAnswer> answer = HttpGet(target.port, "/metrics");
        if (answer.ok() && answer->code == 200) {
          scrapes[target.task] = answer->body;
        }
      }
      std::vector<std::string> missing;
      for (const Milestone& m : kMilestones) {
        auto scrape = scrapes.find(m.task);
        if (scrape == scrapes.end() ||
            SampleSum(scrape->second, m.metric, m.labels) < m.at_least) {
          missing.push_back(absl::StrCat(m.task, " ", m.metric, "{", m.labels,
                                         "} >= ", m.at_least));
        }
      }
      if (missing.empty()) return scrapes;
      if (absl::Now() > give_up) {
        return absl::DeadlineExceededError(
            absl::StrCat("never seen: ", absl::StrJoin(missing, ", "), "\n",
                         psctl_->Output()));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }

  void SetUp() override {
    ASSERT_NE(targets_, nullptr) << "the job did not start";
    ASSERT_FALSE(psctl_->Exited()) << "the job ended\n" << psctl_->Output();
  }

  static std::string* dir_;
  static Subprocess* psctl_;
  static std::vector<Target>* targets_;
};

std::string* GrafanaDashboardTest::dir_ = nullptr;
Subprocess* GrafanaDashboardTest::psctl_ = nullptr;
std::vector<Target>* GrafanaDashboardTest::targets_ = nullptr;

TEST_F(GrafanaDashboardTest, TheJobHasEveryRoleAsATarget) {
  std::vector<std::string> tasks;
  for (const Target& target : *targets_) tasks.push_back(target.task);
  EXPECT_THAT(tasks,
              ::testing::UnorderedElementsAre("chief-0", "evaluator-0", "ps-0",
                                              "worker-0", "worker-1"));
}

// Once the job has done everything the dashboard shows (kMilestones),
// every metric each query reads is in some task's exposition.
TEST_F(GrafanaDashboardTest, EveryQueryReadsOnlyMetricsTheJobExports) {
  ASSERT_OK_AND_ASSIGN(std::vector<DashboardQuery> queries,
                       DashboardQueries(ReadDashboard()));
  ASSERT_GE(queries.size(), 20u) << "the dashboard lost its queries";
  ASSERT_OK_AND_ASSIGN(Scrapes scrapes, ScrapeOnceEverythingHappened());
  std::set<std::string> exported;
  std::string scraped;
  for (const auto& [task, text] : scrapes) {
    const std::set<std::string> names = ExposedMetricNames(text);
    exported.insert(names.begin(), names.end());
    absl::StrAppend(&scraped, task, ": ", absl::StrJoin(names, " "), "\n");
  }
  const std::vector<std::string> problems =
      UnexportedMetrics(queries, exported, kPrometheusSeries);
  EXPECT_THAT(problems, ::testing::IsEmpty())
      << absl::StrJoin(problems, "\n") << "\n\nmetrics exported:\n"
      << scraped;
}

// Prometheus itself evaluates each query, Grafana's variables filled in
// as Grafana would: each must parse (an error answer fails at once) and
// return at least one series (a wrong label value returns none).
TEST_F(GrafanaDashboardTest, EveryQueryReturnsSeriesFromPrometheus) {
  const JsonValue dashboard = ReadDashboard();
  ASSERT_OK_AND_ASSIGN(std::vector<DashboardQuery> queries,
                       DashboardQueries(dashboard));
  std::map<std::string, std::string> values = kBuiltinVariables;
  values["psflow_job"] = kJobName;
  values["task_type"] = ".*";  // the variable's "All"
  // where -> the query with its variables filled in.
  std::map<std::string, std::string> pending;
  std::vector<std::string> errors;
  for (const DashboardQuery& query : queries) {
    absl::StatusOr<std::string> expr =
        ExpandGrafanaVariables(query.expr, values);
    if (!expr.ok()) {
      errors.push_back(
          absl::StrCat(query.where, ": ", expr.status().message()));
    } else {
      pending[query.where] = *expr;
    }
  }
  ASSERT_OK(ScrapeOnceEverythingHappened().status());

  ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  const std::string config = WriteTestFile(
      "prometheus.yml",
      absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n  - job_name: psflow\n"
                   "    file_sd_configs:\n      - files: [\"",
                   *dir_, "/prometheus_targets.json\"]\n"));
  Subprocess prometheus({"/usr/bin/prometheus", "--config.file=" + config,
                         "--storage.tsdb.path=" + TempPath("tsdb"),
                         absl::StrCat("--web.listen-address=127.0.0.1:", port),
                         "--log.level=warn"},
                        {}, TempPath("prometheus.log"));
  ASSERT_OK(prometheus.Start());

  // Up to three rounds, each once Prometheus holds a rate window's worth
  // of scrapes (kReadyExpr) newer than the last round's: a query that
  // returns nothing three times over never will.
  std::map<std::string, std::string> last_answer;
  std::map<std::string, double> scraped_at;
  for (int round = 0; round < 3 && !pending.empty(); ++round) {
    const absl::Time give_up = absl::Now() + kDeadline;
    while (true) {
      ASSERT_FALSE(psctl_->Exited()) << "the job ended\n" << psctl_->Output();
      ASSERT_FALSE(prometheus.Exited())
          << "prometheus exited (Debian package `prometheus`)\n"
          << prometheus.Output();
      ASSERT_LT(absl::Now(), give_up)
          << "Prometheus never scraped every task:\n"
          << prometheus.Output();
      absl::StatusOr<std::map<std::string, double>> ready =
          ScrapeTimes(port, targets_->size(), scraped_at);
      if (ready.ok()) {
        scraped_at = *std::move(ready);
        break;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    for (auto it = pending.begin(); it != pending.end();) {
      absl::StatusOr<HttpAnswer> answer =
          HttpGet(port, "/api/v1/query?query=" + UrlEncode(it->second));
      ASSERT_OK(answer);
      last_answer[it->first] = answer->body;
      ASSERT_OK_AND_ASSIGN(JsonValue json, ParseJson(answer->body));
      const JsonValue* status = json.Find("status");
      const JsonValue* data = json.Find("data");
      const JsonValue* result =
          data == nullptr ? nullptr : data->Find("result");
      if (status == nullptr || status->kind() != JsonValue::Kind::kString ||
          status->string_value() != "success") {
        errors.push_back(
            absl::StrCat(it->first, ": ", it->second, "\n  ", answer->body));
        it = pending.erase(it);
      } else if (result != nullptr &&
                 result->kind() == JsonValue::Kind::kArray &&
                 !result->array().empty()) {
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [where, expr] : pending) {
    errors.push_back(absl::StrCat(where, ": no series: ", expr,
                                  "\n  answer: ", last_answer[where]));
  }
  prometheus.Signal(SIGTERM);
  EXPECT_OK(prometheus.Wait(absl::Seconds(30)));
  EXPECT_THAT(errors, ::testing::IsEmpty()) << absl::StrJoin(errors, "\n");
}

// The file as Grafana's import expects it, without a job.
TEST(GrafanaDashboardFileTest, ImportsWithADatasourceInputAndItsVariables) {
  const JsonValue dashboard = ReadDashboard();
  ASSERT_EQ(dashboard.kind(), JsonValue::Kind::kObject);
  for (const char* key : {"uid", "title"}) {
    const JsonValue* value = dashboard.Find(key);
    ASSERT_NE(value, nullptr) << key;
    EXPECT_EQ(value->kind(), JsonValue::Kind::kString) << key;
  }
  // The import dialog asks for the datasource that ${DS_PROMETHEUS} names.
  const JsonValue* inputs = dashboard.Find("__inputs");
  ASSERT_NE(inputs, nullptr);
  ASSERT_EQ(inputs->kind(), JsonValue::Kind::kArray);
  ASSERT_EQ(inputs->array().size(), 1u);
  EXPECT_EQ(inputs->array()[0].Find("name")->string_value(), "DS_PROMETHEUS");
  EXPECT_EQ(inputs->array()[0].Find("pluginId")->string_value(), "prometheus");

  auto uses_input = [](const JsonValue& owner) {
    const JsonValue* datasource = owner.Find("datasource");
    const JsonValue* uid =
        datasource == nullptr ? nullptr : datasource->Find("uid");
    return uid != nullptr && uid->kind() == JsonValue::Kind::kString &&
           uid->string_value() == "${DS_PROMETHEUS}";
  };
  std::set<double> ids;
  int data_panels = 0;
  for (const JsonValue& panel : dashboard.Find("panels")->array()) {
    const std::string title = panel.Find("title")->string_value();
    ASSERT_NE(panel.Find("id"), nullptr) << title;
    EXPECT_TRUE(ids.insert(panel.Find("id")->number_value()).second)
        << "two panels have the id of " << title;
    const JsonValue* grid = panel.Find("gridPos");
    ASSERT_NE(grid, nullptr) << title;
    EXPECT_LE(grid->Find("x")->number_value() + grid->Find("w")->number_value(),
              24)
        << title << " is wider than the dashboard";
    if (panel.Find("type")->string_value() == "row") continue;
    ++data_panels;
    EXPECT_TRUE(uses_input(panel)) << title;
    const JsonValue* targets = panel.Find("targets");
    ASSERT_NE(targets, nullptr) << title;
    EXPECT_FALSE(targets->array().empty()) << title << " has no query";
    for (const JsonValue& target : targets->array()) {
      EXPECT_TRUE(uses_input(target)) << title;
    }
  }
  EXPECT_GE(data_panels, 20);
  for (const JsonValue& variable :
       dashboard.Find("templating")->Find("list")->array()) {
    EXPECT_TRUE(uses_input(variable)) << variable.Find("name")->string_value();
  }

  // Every variable a query uses is the dashboard's or Grafana's own.
  std::set<std::string> known;
  for (const std::string& name : DashboardVariableNames(dashboard)) {
    known.insert(name);
  }
  for (const auto& [name, value] : kBuiltinVariables) known.insert(name);
  ASSERT_OK_AND_ASSIGN(std::vector<DashboardQuery> queries,
                       DashboardQueries(dashboard));
  for (const DashboardQuery& query : queries) {
    for (const std::string& name : GrafanaVariableNames(query.expr)) {
      EXPECT_TRUE(known.count(name))
          << query.where << " uses $" << name << ", which is not defined";
    }
  }
}

}  // namespace
}  // namespace psflow::testing
