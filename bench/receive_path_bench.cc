// receive_path_bench: the server's CPU time per pushed float on a TCP
// push's path after gRPC has received it (issue 35), in one process, so
// that a change to it can be measured on a machine too busy for ps_bench's
// wall-clock numbers:
//
//   bazel build --config=opt //bench:receive_path_bench
//   bazel-bin/bench/receive_path_bench [--optimizer=sgd,adam]
//
// A push frame of one 4 MiB chunk, cut into receive slices of
// --slice_bytes at unaligned offsets as the network delivers it, is
// parsed and pushed through ParameterServerCore (one apply thread:
// everything on this thread) in four ways, alternating round by round:
//   copy, then check: copied out whole into a reused buffer, then
//     PushBatch's own NaN/Inf pass over it (the server at c990516);
//   check while copying: each 64 KiB block checked as it lands
//     (BulkFrame::CopyPayload's visitor), PushBatch told Finite::kChecked
//     (26f73f3);
//   read twice: no whole copy; the core reads the gradient out of the
//     slices block by block for the check and again for the update
//     (ps/gradient.h; d803d39);
//   checked in place: the check reads the slices where they lie
//     (BulkFrame::ForEachPayloadRun, AllFiniteAt), then the update reads
//     them block by block once, PushBatch told Finite::kChecked (the
//     server now);
// and, as the floor, the PushBatch alone (checked, the gradient already in
// one aligned buffer).
// Prints the median over rounds of this thread's CPU time per float.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "common/float_mode.h"
#include "common/rpc/bulk_frame.h"
#include "proto/protocol.h"
#include "proto/ps.pb.h"
#include "ps/finite_values.h"
#include "ps/gradient.h"
#include "ps/ps_core.h"

ABSL_FLAG(std::string, optimizer, "sgd,adam", "Optimizers to measure");
ABSL_FLAG(int, rounds, 9, "Alternating rounds (the median is shown)");
ABSL_FLAG(int, pushes, 40, "Pushes per way per round");
ABSL_FLAG(int64_t, slice_bytes, 256 << 10,
          "Receive slice size (gRPC's reads on loopback: 130-650 KB)");

namespace psflow::bench {
namespace {

constexpr int64_t kFloats = int64_t{1} << 20;  // one 4 MiB chunk

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The frame as the network hands it over: slices of `slice_bytes`, the
// first shorter by 3 bytes so that no float is aligned.
grpc::ByteBuffer Received(const grpc::ByteBuffer& frame, int64_t slice_bytes) {
  grpc::Slice whole;
  if (!frame.DumpToSingleSlice(&whole).ok()) std::abort();
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  size_t next = static_cast<size_t>(slice_bytes) - 3;
  while (at < whole.size()) {
    const size_t n = std::min(next, whole.size() - at);
    slices.emplace_back(whole.begin() + at, n);
    at += n;
    next = static_cast<size_t>(slice_bytes);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

int Run(const std::string& optimizer) {
  ParameterServerCore::Options options;
  options.chunk_bytes = kFloats * sizeof(float);
  options.apply_threads = 1;
  ParameterServerCore core(options);
  ConfigureRequest config;
  config.set_protocol_version(kProtocolVersion);
  config.mutable_optimizer()->set_kind(
      optimizer == "adam" ? OptimizerConfig::ADAM : OptimizerConfig::SGD);
  config.mutable_learning_rate()->set_learning_rate(1e-9);
  config.set_mode(ASYNC);
  CreateVariablesRequest create;
  create.set_protocol_version(kProtocolVersion);
  VariableSpec* spec = create.add_variables();
  spec->set_name("v");
  spec->add_shape(kFloats);
  if (!core.Configure(config).ok() || !core.CreateVariables(create).ok()) {
    std::fprintf(stderr, "configuring the core failed\n");
    return 1;
  }
  const ChunkRef ref = *core.Resolve(kProtocolVersion, "v", 0, kFloats);
  PushBatchRequest header;
  header.set_protocol_version(kProtocolVersion);
  PushRequest* part = header.add_parts();
  part->set_variable("v");
  part->set_num_elements(kFloats);
  auto grad = std::make_shared<std::vector<float>>(kFloats, 1e-3f);
  const grpc::ByteBuffer received = Received(
      EncodeBulkFrame(header, *grad, grad), absl::GetFlag(FLAGS_slice_bytes));
  std::vector<float> buffer(kFloats);  // the server's reused buffer
  const absl::Span<float> pieces[] = {absl::MakeSpan(buffer)};
  const std::vector<absl::Span<const float>> gradients = {buffer};
  EnableFlushToZero();

  int64_t version = 0;
  auto push = [&](int way) {
    const bool fused = way == 1;
    if (way == 2 || way == 3) {
      PushBatchRequest parsed;
      absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(received, parsed);
      auto read = [&frame](int64_t begin, absl::Span<float> out) {
        if (!frame->ReadPayload(begin, out).ok()) std::abort();
      };
      const Gradient gradient(kFloats, read);
      bool finite = false;  // way 2: the core checks
      if (way == 3) {
        finite = true;
        frame->ForEachPayloadRun([&finite](const char* bytes, size_t floats) {
          finite = finite && AllFiniteAt(bytes, floats);
        });
      }
      if (!core.PushBatch({&ref, 1}, version++, 0, {&gradient, 1},
                          finite ? ParameterServerCore::Finite::kChecked
                                 : ParameterServerCore::Finite::kUnchecked)
               .ok()) {
        std::abort();
      }
      return;
    }
    if (way == 4) {
      if (!core.PushBatch({&ref, 1}, version++, 0, gradients,
                          ParameterServerCore::Finite::kChecked)
               .ok()) {
        std::abort();
      }
      return;
    }
    PushBatchRequest parsed;
    absl::StatusOr<BulkFrame> frame = BulkFrame::Parse(received, parsed);
    bool finite = true;
    absl::Status copied =
        fused ? frame->CopyPayload(pieces,
                                   [&finite](absl::Span<const float> block) {
                                     finite = AllFinite(block) && finite;
                                   })
              : frame->CopyPayload(pieces);
    if (!copied.ok()) std::abort();
    absl::StatusOr<PushBatchResponse> r = core.PushBatch(
        {&ref, 1}, version++, 0, gradients,
        fused && finite ? ParameterServerCore::Finite::kChecked
                        : ParameterServerCore::Finite::kUnchecked);
    if (!r.ok()) std::abort();
  };
  const int pushes = std::max(1, absl::GetFlag(FLAGS_pushes));
  constexpr int kWays = 5;
  std::vector<double> ns[kWays];
  for (int i = 0; i < 2 * kWays; ++i) push(i % kWays);  // warm
  for (int round = 0; round < std::max(1, absl::GetFlag(FLAGS_rounds));
       ++round) {
    for (int way = 0; way < kWays; ++way) {
      const double start = ThreadCpuSeconds();
      for (int i = 0; i < pushes; ++i) push(way);
      ns[way].push_back((ThreadCpuSeconds() - start) * 1e9 /
                        (static_cast<double>(kFloats) * pushes));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f |\n",
              optimizer.c_str(), median(ns[0]), median(ns[1]), median(ns[2]),
              median(ns[3]), median(ns[4]), median(ns[3]) / median(ns[2]));
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf(
      "| optimizer | copy, then check | check while copying | read twice "
      "| checked in place | apply alone (floor) | checked in place / read "
      "twice |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n");
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_optimizer), ',', absl::SkipEmpty())) {
    if (int rc = psflow::bench::Run(std::string(name)); rc != 0) return rc;
  }
  return 0;
}
