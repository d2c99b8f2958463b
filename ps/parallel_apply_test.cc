// The optimizer apply spread over the server's cores (ps/apply_pool.h)
// gives bit for bit the result of the apply on one thread: for every
// optimizer, at sizes around the inline threshold, in sync aggregation,
// for batches, and under many concurrent pushes.
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/float_mode.h"
#include "common/mutex.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/apply_pool.h"
#include "ps/lr_schedule.h"
#include "ps/optimizer.h"
#include "ps/ps_core.h"
#include "ps/variable.h"

namespace psflow {
namespace {

using Kind = OptimizerParams::Kind;

// The first float that differs in bits, or -1.
int64_t FirstDifference(const std::vector<float>& a,
                        const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::vector<float> MakeRandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(random);
  // Some exact zeros (a border pixel's gradient), large values and
  // subnormals (which flush-to-zero reads as 0: a thread without it would
  // compute other bits).
  for (int64_t i = 0; i < n; i += 7) v[i] = 0.0f;
  for (int64_t i = 3; i < n; i += 101) v[i] *= 1000.0f;
  for (int64_t i = 5; i < n; i += 13) {
    v[i] = std::numeric_limits<float>::min() / 8 * (i % 2 == 0 ? 1 : -1);
  }
  return v;
}

// MakeRandomFloats, made once per (n, seed) (the tests ask for the same
// ones many times).
const std::vector<float>& RandomFloats(int64_t n, uint32_t seed) {
  static Mutex mu;
  static auto* made =
      new std::map<std::pair<int64_t, uint32_t>, std::vector<float>>();
  MutexLock lock(&mu);
  auto [it, inserted] = made->try_emplace({n, seed});
  if (inserted) it->second = MakeRandomFloats(n, seed);
  return it->second;
}

struct OptimizerCase {
  std::string name;
  OptimizerParams params;
  VariableUpdate update = VariableUpdate::kOptimizer;
};

std::vector<OptimizerCase> EveryOptimizer() {
  std::vector<OptimizerCase> cases;
  auto add = [&cases](std::string name, Kind kind) -> OptimizerParams& {
    cases.push_back({std::move(name), OptimizerParams{}});
    cases.back().params.kind = kind;
    return cases.back().params;
  };
  add("sgd", Kind::kSgd);
  add("momentum", Kind::kMomentum);
  add("nesterov", Kind::kMomentum).nesterov = true;
  add("adagrad", Kind::kAdagrad);
  add("adam", Kind::kAdam);
  add("adamw", Kind::kAdamW).weight_decay = 0.01;
  OptimizerParams& ftrl = add("ftrl", Kind::kFtrl);
  ftrl.l1 = 0.01;
  ftrl.l2 = 0.001;
  add("ftrl_power", Kind::kFtrl).learning_rate_power = -0.7;
  add("moving_average", Kind::kSgd);
  cases.back().update = VariableUpdate::kMovingAverage;
  return cases;
}

// One variable with its rule; `pool` null applies on the calling thread.
class TestVariable {
 public:
  TestVariable(const OptimizerCase& c, int64_t n, int64_t chunk_elements,
               ApplyPool* pool, bool sync = false, int replicas = 1) {
    optimizer_ = *Optimizer::Create(c.params);
    LrScheduleConfig schedule;
    schedule.learning_rate = 0.05;
    schedule.kind = LrScheduleConfig::Kind::kExponential;
    schedule.decay_steps = 2;
    schedule.decay_rate = 0.5;
    schedule_ = std::make_unique<LrSchedule>(*LrSchedule::Create(schedule));
    UpdateRule rule;
    rule.optimizer = optimizer_.get();
    rule.schedule = schedule_.get();
    rule.sync = sync;
    rule.replicas_to_aggregate = replicas;
    rule.staleness_aware = !sync;
    rule.pool = pool;
    variable_ = std::make_unique<Variable>("v", std::vector<int64_t>{n}, n,
                                           chunk_elements, rule, c.update,
                                           /*momentum=*/0.9f);
    const std::vector<float>& initial = RandomFloats(n, 1);
    for (int chunk = 0; chunk < variable_->num_chunks(); ++chunk) {
      variable_->Write(chunk, Chunk(initial, chunk));
    }
  }

  Variable& variable() { return *variable_; }

  // The floats of `all` that chunk `chunk` covers.
  absl::Span<const float> Chunk(const std::vector<float>& all, int chunk) {
    const int64_t begin = chunk * variable_->chunk_elements();
    return absl::MakeConstSpan(all).subspan(
        begin, std::min(variable_->chunk_elements(),
                        variable_->num_elements() - begin));
  }

  // Values, then every slot, of the whole variable.
  std::vector<std::vector<float>> State() {
    const int64_t n = variable_->num_elements();
    std::vector<std::vector<float>> state(1 + variable_->slot_names().size(),
                                          std::vector<float>(n));
    for (int chunk = 0; chunk < variable_->num_chunks(); ++chunk) {
      const int64_t begin = chunk * variable_->chunk_elements();
      const int64_t size = std::min(variable_->chunk_elements(), n - begin);
      std::vector<absl::Span<float>> slots;
      for (size_t s = 1; s < state.size(); ++s) {
        slots.push_back(absl::MakeSpan(state[s]).subspan(begin, size));
      }
      variable_->Snapshot(chunk, absl::MakeSpan(state[0]).subspan(begin, size),
                          slots);
    }
    return state;
  }

 private:
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Variable> variable_;
};

void ExpectSameBits(TestVariable& expected, TestVariable& actual) {
  const auto want = expected.State();
  const auto got = actual.State();
  ASSERT_EQ(want.size(), got.size());
  for (size_t s = 0; s < want.size(); ++s) {
    const int64_t at = FirstDifference(want[s], got[s]);
    EXPECT_EQ(at, -1) << (s == 0 ? std::string("values")
                                 : absl::StrCat("slot ", s - 1))
                      << " differ first at float " << at << ": " << want[s][at]
                      << " on one thread, " << got[s][at] << " split";
  }
}

// Three async updates, the second one stale (staleness-aware rate).
void PushAsyncSteps(TestVariable& v, int64_t n) {
  for (int step = 0; step < 3; ++step) {
    const std::vector<float>& gradient = RandomFloats(n, 100 + step);
    for (int chunk = 0; chunk < v.variable().num_chunks(); ++chunk) {
      const int64_t version = step == 1 ? 0 : v.variable().Version(chunk);
      ASSERT_OK(v.variable().Push(chunk, v.Chunk(gradient, chunk), version,
                                  /*worker=*/0));
    }
  }
}

TEST(ParallelApplyTest, EveryOptimizerGivesTheSameBitsOnAnyThreadCount) {
  EnableFlushToZero();
  for (const OptimizerCase& c : EveryOptimizer()) {
    for (int threads : {2, 3, 4}) {
      for (int64_t min_parallel : {int64_t{0}, int64_t{1000}}) {
        // Ranges as short as the pool allows: many boundaries, at odd
        // sizes too.
        ApplyPool::Options options;
        options.threads = threads;
        options.min_parallel_work = min_parallel;
        options.min_range_floats = ApplyPool::kRangeAlignFloats;
        ApplyPool pool(options);
        for (int64_t n : {1, 63, 64, 65, 999, 1000, 1001, 4099, 70001}) {
          SCOPED_TRACE(absl::StrCat(c.name, ", ", threads, " threads, ",
                                    "threshold ", min_parallel, ", ", n,
                                    " floats"));
          TestVariable one_thread(c, n, /*chunk_elements=*/40000, nullptr);
          TestVariable split(c, n, /*chunk_elements=*/40000, &pool);
          PushAsyncSteps(one_thread, n);
          PushAsyncSteps(split, n);
          ExpectSameBits(one_thread, split);
        }
      }
    }
  }
}

// Sync: two of three workers' gradients per step (one a backup), averaged
// and applied once; a duplicate and a stale push change nothing.
TEST(ParallelApplyTest, SyncAggregationGivesTheSameBitsAndOutcomes) {
  EnableFlushToZero();
  ApplyPool::Options options;
  options.threads = 3;
  options.min_parallel_work = 256;
  options.min_range_floats = 128;
  ApplyPool pool(options);
  for (const OptimizerCase& c : EveryOptimizer()) {
    SCOPED_TRACE(c.name);
    const int64_t n = 30011;
    TestVariable one_thread(c, n, 20000, nullptr, /*sync=*/true, 2);
    TestVariable split(c, n, 20000, &pool, /*sync=*/true, 2);
    for (int step = 0; step < 3; ++step) {
      for (int worker : {1, 1, 0, 2}) {
        const std::vector<float>& g = RandomFloats(n, 10 * step + worker);
        for (int chunk = 0; chunk < 2; ++chunk) {
          auto a = one_thread.variable().Push(chunk, one_thread.Chunk(g, chunk),
                                              step, worker);
          auto b =
              split.variable().Push(chunk, split.Chunk(g, chunk), step, worker);
          ASSERT_EQ(a.ok(), b.ok());
          EXPECT_EQ(a.status().code(), b.status().code());
          if (a.ok()) {
            EXPECT_EQ(*a, *b);
          }
        }
      }
    }
    EXPECT_EQ(split.variable().Version(0), 3);
    ExpectSameBits(one_thread, split);
  }
}

// ---- Through the server core, with its default threshold ----

ConfigureRequest Adam(UpdateMode mode = ASYNC, int workers = 1) {
  ConfigureRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  request.mutable_learning_rate()->set_learning_rate(0.01);
  request.set_mode(mode);
  request.set_num_workers(workers);
  request.set_replicas_to_aggregate(workers);
  return request;
}

// A server core with `threads` apply threads and 1 MiB chunks.
std::unique_ptr<ParameterServerCore> Core(
    int threads, const std::vector<std::pair<std::string, int64_t>>& vars,
    const ConfigureRequest& config = Adam()) {
  ParameterServerCore::Options options;
  options.chunk_bytes = 1 << 20;
  options.apply_threads = threads;
  auto core = std::make_unique<ParameterServerCore>(options);
  EXPECT_OK(core->Configure(config));
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  for (const auto& [name, n] : vars) {
    VariableSpec* spec = create.add_variables();
    spec->set_name(name);
    spec->add_shape(n);
  }
  EXPECT_OK(core->CreateVariables(create));
  return core;
}

// Every variable's values and slots, in name order.
std::vector<std::vector<float>> CoreState(ParameterServerCore& core) {
  std::vector<std::vector<float>> state;
  const std::vector<Variable*> variables = *core.ListVariables();
  for (Variable* v : variables) {
    const int64_t n = v->num_elements();
    std::vector<std::vector<float>> parts(1 + v->slot_names().size(),
                                          std::vector<float>(n));
    for (int chunk = 0; chunk < v->num_chunks(); ++chunk) {
      const int64_t begin = chunk * v->chunk_elements();
      const int64_t size = std::min(v->chunk_elements(), n - begin);
      std::vector<absl::Span<float>> slots;
      for (size_t s = 1; s < parts.size(); ++s) {
        slots.push_back(absl::MakeSpan(parts[s]).subspan(begin, size));
      }
      v->Snapshot(chunk, absl::MakeSpan(parts[0]).subspan(begin, size), slots);
    }
    for (auto& part : parts) state.push_back(std::move(part));
  }
  return state;
}

void ExpectSameCoreBits(ParameterServerCore& expected,
                        ParameterServerCore& actual) {
  const auto want = CoreState(expected);
  const auto got = CoreState(actual);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(FirstDifference(want[i], got[i]), -1) << "array " << i;
  }
}

// Pushes every chunk of every variable once per step: the whole chunks
// one per call, the rest as one batch (as the client sends them), or every
// chunk in a call of its own.
void PushSteps(ParameterServerCore& core, int steps, bool batch_parts = true) {
  const int worker = 0;
  const int64_t chunk = core.chunk_elements();
  for (int step = 0; step < steps; ++step) {
    std::vector<ChunkRef> batch;
    std::vector<std::vector<float>> gradients;
    const std::vector<Variable*> variables = *core.ListVariables();
    for (Variable* v : variables) {
      for (int64_t offset = 0; offset < v->num_elements(); offset += chunk) {
        const int64_t n = std::min(chunk, v->num_elements() - offset);
        ChunkRef ref = *core.Resolve(kProtocolVersion, v->name(), offset, n);
        std::vector<float> g =
            RandomFloats(n, static_cast<uint32_t>(step * 7919 + offset + n));
        if (n == chunk || !batch_parts) {
          PushRequest request;
          request.set_version(step);
          request.set_worker_index(worker);
          ASSERT_OK(core.Push(ref, request, g));
        } else {
          batch.push_back(ref);
          gradients.push_back(std::move(g));
        }
      }
    }
    if (batch.empty()) continue;
    std::vector<absl::Span<const float>> spans(gradients.begin(),
                                               gradients.end());
    absl::StatusOr<PushBatchResponse> response =
        core.PushBatch(batch, step, worker, spans);
    ASSERT_OK(response);
    for (const PushPartResult& part : response->results()) {
      EXPECT_EQ(part.code(), 0) << part.message();
    }
  }
}

TEST(ParallelApplyTest, SizesAroundTheInlineThresholdGiveTheSameBits) {
  EnableFlushToZero();
  // Adam's floats count at cost 1: the threshold is in floats.
  const int64_t t = ApplyPool::kDefaultMinParallelWork;
  const std::vector<std::pair<std::string, int64_t>> vars = {
      {"a_below", t - 1},
      {"b_at", t},
      {"c_above", t + 1},
      {"d_two", 2 * t + 63},
      {"e_big", (1 << 18) * 2 + 3}};
  for (bool batch_parts : {false, true}) {
    SCOPED_TRACE(batch_parts ? "batched" : "one chunk per push");
    auto one_thread = Core(1, vars);
    auto split = Core(4, vars);
    PushSteps(*one_thread, 3, batch_parts);
    PushSteps(*split, 3, batch_parts);
    ExpectSameCoreBits(*one_thread, *split);
    EXPECT_EQ(split->Stats().updates_applied(),
              one_thread->Stats().updates_applied());
  }
}

// A batch of many chunks below the threshold, together above it: its
// chunks apply on different threads.
TEST(ParallelApplyTest, ABatchOfManySmallChunksGivesTheSameBits) {
  EnableFlushToZero();
  std::vector<std::pair<std::string, int64_t>> vars;
  for (int i = 0; i < 40; ++i) {
    vars.emplace_back(absl::StrCat("v", 100 + i), 3000 + 97 * i);
  }
  auto one_thread = Core(1, vars);
  auto split = Core(3, vars);
  PushSteps(*one_thread, 3);
  PushSteps(*split, 3);
  ExpectSameCoreBits(*one_thread, *split);
}

// A batch that names one chunk twice applies in order: the same two
// updates, one after the other, as on one thread.
TEST(ParallelApplyTest, ABatchNamingAChunkTwiceAppliesInOrder) {
  EnableFlushToZero();
  const std::vector<std::pair<std::string, int64_t>> vars = {{"a", 90000},
                                                             {"b", 90000}};
  auto one_thread = Core(1, vars);
  auto split = Core(3, vars);
  for (ParameterServerCore* core : {one_thread.get(), split.get()}) {
    ChunkRef a = *core->Resolve(kProtocolVersion, "a", 0, 90000);
    ChunkRef b = *core->Resolve(kProtocolVersion, "b", 0, 90000);
    const std::vector<float>& g1 = RandomFloats(90000, 1);
    const std::vector<float>& g2 = RandomFloats(90000, 2);
    const std::vector<ChunkRef> refs = {a, b, a};
    const std::vector<absl::Span<const float>> gradients = {g1, g2, g2};
    absl::StatusOr<PushBatchResponse> response =
        core->PushBatch(refs, 0, 0, gradients);
    ASSERT_OK(response);
    ASSERT_EQ(response->results_size(), 3);
    EXPECT_EQ(response->results(0).version(), 1);
    EXPECT_EQ(response->results(2).version(), 2);
  }
  ExpectSameCoreBits(*one_thread, *split);
}

// Many threads push at once (the server's gRPC and shared-memory threads),
// each its own variables, large and small: the apply threads serve them
// all, and each variable ends as the same pushes on one thread leave it.
TEST(ParallelApplyTest, ManyConcurrentPushesGiveTheSerialResult) {
  EnableFlushToZero();
  constexpr int kPushers = 6;
  std::vector<std::pair<std::string, int64_t>> vars;
  for (int p = 0; p < kPushers; ++p) {
    vars.emplace_back(absl::StrCat("big", p), 300000 + 1001 * p);
    vars.emplace_back(absl::StrCat("small", p), 5000 + 13 * p);
  }
  auto one_thread = Core(1, vars);
  auto split = Core(3, vars);
  auto push_all = [&vars](ParameterServerCore& core, int p) {
    for (int step = 0; step < 4; ++step) {
      for (const std::string& name :
           {vars[2 * p].first, vars[2 * p + 1].first}) {
        const int64_t n = name == vars[2 * p].first ? vars[2 * p].second
                                                    : vars[2 * p + 1].second;
        const int64_t chunk = core.chunk_elements();
        for (int64_t offset = 0; offset < n; offset += chunk) {
          const int64_t size = std::min(chunk, n - offset);
          ChunkRef ref = *core.Resolve(kProtocolVersion, name, offset, size);
          PushRequest request;
          request.set_version(step);
          ASSERT_OK(core.Push(
              ref, request,
              RandomFloats(size, static_cast<uint32_t>(step + offset + p))));
        }
      }
    }
  };
  for (int p = 0; p < kPushers; ++p) push_all(*one_thread, p);
  std::vector<std::thread> pushers;
  for (int p = 0; p < kPushers; ++p) {
    pushers.emplace_back([&, p] { push_all(*split, p); });
  }
  for (std::thread& t : pushers) t.join();
  ExpectSameCoreBits(*one_thread, *split);
  EXPECT_EQ(split->Stats().updates_applied(),
            one_thread->Stats().updates_applied());
}

// Sync, four workers pushing every step at once: each step aggregates
// exactly one gradient per worker (the gradients are small integers, so
// the sum is exact whatever the order they arrive in) and is applied once.
TEST(ParallelApplyTest, ConcurrentSyncWorkersAggregateOneGradientEachPerStep) {
  EnableFlushToZero();
  constexpr int kWorkers = 4;
  constexpr int kSteps = 5;
  constexpr int64_t kN = 200003;
  ConfigureRequest sgd = Adam(SYNC, kWorkers);
  sgd.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  sgd.mutable_learning_rate()->set_learning_rate(0.5);
  auto core = Core(3, {{"w", kN}}, sgd);
  const int64_t chunk = core->chunk_elements();
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      const std::vector<float> g(chunk, static_cast<float>(w + 1));
      for (int step = 0; step < kSteps; ++step) {
        for (int64_t offset = 0; offset < kN; offset += chunk) {
          const int64_t size = std::min(chunk, kN - offset);
          ChunkRef ref = *core->Resolve(kProtocolVersion, "w", offset, size);
          // A push for a step the chunk has not reached is refused: wait
          // for it as a pull does.
          Notification reached;
          if (ref.variable->WhenVersionReached(ref.chunk, step,
                                               [&] { reached.Notify(); })) {
            ASSERT_TRUE(
                reached.WaitForNotificationWithTimeout(absl::Seconds(60)));
          }
          PushRequest request;
          request.set_version(step);
          request.set_worker_index(w);
          ASSERT_OK(core->Push(ref, request,
                               absl::MakeConstSpan(g).subspan(0, size)));
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const StatsResponse stats = core->Stats();
  const int64_t chunks = (kN + chunk - 1) / chunk;
  EXPECT_EQ(stats.updates_applied(), kSteps * chunks);
  EXPECT_EQ(stats.stale_gradients_dropped(), 0);
  std::vector<float> values(kN);
  for (int64_t offset = 0; offset < kN; offset += chunk) {
    const int64_t size = std::min(chunk, kN - offset);
    ChunkRef ref = *core->Resolve(kProtocolVersion, "w", offset, size);
    EXPECT_EQ(
        core->Pull(ref, absl::MakeSpan(values).subspan(offset, size)).version(),
        kSteps);
  }
  // Each step: w -= 0.5 * mean(1, 2, 3, 4) = 1.25.
  for (float v : values) ASSERT_EQ(v, -1.25f * kSteps);
}

}  // namespace
}  // namespace psflow
