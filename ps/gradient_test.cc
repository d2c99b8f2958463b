#include "ps/gradient.h"

#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

// The blocks a gradient hands over, as (offset, values).
std::vector<std::pair<int64_t, std::vector<float>>> Blocks(
    const Gradient& gradient, int64_t begin, int64_t end) {
  std::vector<std::pair<int64_t, std::vector<float>>> blocks;
  gradient.ForEachBlock(
      begin, end, [&](int64_t at, absl::Span<const float> values) {
        blocks.emplace_back(at,
                            std::vector<float>(values.begin(), values.end()));
      });
  return blocks;
}

TEST(GradientTest, ASpanIsHandedOverWholeAndInPlace) {
  std::vector<float> values = {1, 2, 3, 4, 5};
  const Gradient gradient(values);
  EXPECT_EQ(gradient.size(), 5);
  ASSERT_TRUE(gradient.span().has_value());
  EXPECT_EQ(gradient.span()->data(), values.data());
  int calls = 0;
  gradient.ForEachBlock(1, 4, [&](int64_t at, absl::Span<const float> block) {
    ++calls;
    EXPECT_EQ(at, 1);
    EXPECT_EQ(block.data(), values.data() + 1);
    EXPECT_EQ(block.size(), 3u);
  });
  EXPECT_EQ(calls, 1);
}

// A read gradient asks its reader for consecutive blocks of at most
// kBlockFloats that cover exactly the range asked for.
TEST(GradientTest, AReadGradientIsReadInBlocksCoveringTheRange) {
  const int64_t n = 2 * Gradient::kBlockFloats + 11;
  std::vector<float> source(n);
  std::iota(source.begin(), source.end(), 0.0f);
  std::vector<std::pair<int64_t, size_t>> reads;
  auto read = [&](int64_t begin, absl::Span<float> out) {
    reads.emplace_back(begin, out.size());
    std::copy(source.begin() + begin, source.begin() + begin + out.size(),
              out.begin());
  };
  const Gradient gradient(n, read);
  EXPECT_EQ(gradient.size(), n);
  EXPECT_FALSE(gradient.span().has_value());
  const int64_t begin = 5;
  std::vector<float> seen;
  int64_t expected_at = begin;
  for (const auto& [at, values] : Blocks(gradient, begin, n)) {
    EXPECT_EQ(at, expected_at);
    EXPECT_LE(static_cast<int64_t>(values.size()), Gradient::kBlockFloats);
    seen.insert(seen.end(), values.begin(), values.end());
    expected_at += static_cast<int64_t>(values.size());
  }
  EXPECT_EQ(seen, std::vector<float>(source.begin() + begin, source.end()));
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_EQ(reads[0], (std::pair<int64_t, size_t>{5, Gradient::kBlockFloats}));
  EXPECT_EQ(reads[2].first + static_cast<int64_t>(reads[2].second), n);
  EXPECT_TRUE(Blocks(gradient, 7, 7).empty());
}

// The apply threads read ranges of one gradient at once, each into its
// own block.
TEST(GradientTest, ThreadsReadOneGradientAtOnce) {
  const int64_t n = 8 * Gradient::kBlockFloats;
  std::vector<float> source(n);
  std::iota(source.begin(), source.end(), 0.0f);
  auto read = [&](int64_t begin, absl::Span<float> out) {
    std::copy(source.begin() + begin, source.begin() + begin + out.size(),
              out.begin());
  };
  const Gradient gradient(n, read);
  std::vector<float> sums(2, 0.0f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      const int64_t half = n / 2;
      gradient.ForEachBlock(t * half, (t + 1) * half,
                            [&](int64_t at, absl::Span<const float> block) {
                              for (size_t i = 0; i < block.size(); ++i) {
                                ASSERT_EQ(block[i], source[at + i]);
                              }
                              sums[t] += static_cast<float>(block.size());
                            });
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(sums[0] + sums[1], static_cast<float>(n));
}

}  // namespace
}  // namespace psflow
