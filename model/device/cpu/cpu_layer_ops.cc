#include "model/device/cpu/cpu_layer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace psflow::cpu {
namespace {

// The window of output position (oy, ox) clipped to the image: rows
// [y0, y1) and columns [x0, x1) of the input, and where they start inside
// the window (ky0, kx0).
struct Clip {
  int64_t y0, y1, x0, x1, ky0, kx0;
};

Clip ClipWindow(const WindowGeometry& g, int64_t oy, int64_t ox) {
  const int64_t top = oy * g.sh - g.pad_top, left = ox * g.sw - g.pad_left;
  Clip c;
  c.y0 = std::max<int64_t>(top, 0);
  c.y1 = std::min(top + g.kh, g.h);
  c.x0 = std::max<int64_t>(left, 0);
  c.x1 = std::min(left + g.kw, g.w);
  c.ky0 = c.y0 - top;
  c.kx0 = c.x0 - left;
  return c;
}

// Chunks smaller than this many floats touched are not worth a thread's
// wake-up (a few microseconds).
constexpr int64_t kMinChunkWork = 16384;

// The grain, in items, for items of `work` floats each.
int64_t Grain(int64_t work) {
  return std::max<int64_t>(1, kMinChunkWork / std::max<int64_t>(work, 1));
}

}  // namespace

void Activate(CpuThreadPool& pool, int64_t n, Activation activation,
              const float* x, float* y) {
  pool.ParallelFor(n, kMinChunkWork, [&](int, int64_t begin, int64_t end) {
    switch (activation) {
      case Activation::kNone:
        if (x != y) {
          std::memmove(y + begin, x + begin, (end - begin) * sizeof(float));
        }
        break;
      case Activation::kRelu:
        for (int64_t i = begin; i < end; ++i) y[i] = std::max(x[i], 0.0f);
        break;
      case Activation::kTanh:
        for (int64_t i = begin; i < end; ++i) y[i] = std::tanh(x[i]);
        break;
      case Activation::kSigmoid:
        for (int64_t i = begin; i < end; ++i) {
          y[i] = 1.0f / (1.0f + std::exp(-x[i]));
        }
        break;
    }
  });
}

void Im2ColImages(const WindowGeometry& g, const float* x, float* cols,
                  int64_t first, int64_t last) {
  const int64_t c = g.c, row_len = g.patch_cols();
  for (int64_t img = first; img < last; ++img) {
    const float* image = x + img * g.h * g.w * c;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float* row = cols + ((img * g.oh + oy) * g.ow + ox) * row_len;
        const int64_t top = oy * g.sh - g.pad_top;
        const int64_t left = ox * g.sw - g.pad_left;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          float* out = row + ky * g.kw * c;
          const int64_t iy = top + ky;
          if (iy < 0 || iy >= g.h) {
            std::fill_n(out, g.kw * c, 0.0f);
            continue;
          }
          // The in-image columns are one contiguous run of the input row.
          const int64_t x0 = std::max<int64_t>(left, 0);
          const int64_t x1 = std::min(left + g.kw, g.w);
          const int64_t before = std::min(x0 - left, g.kw);
          std::fill_n(out, before * c, 0.0f);
          if (x1 > x0) {
            std::memcpy(out + before * c, image + (iy * g.w + x0) * c,
                        (x1 - x0) * c * sizeof(float));
          }
          const int64_t after = g.kw - before - std::max<int64_t>(x1 - x0, 0);
          std::fill_n(out + (g.kw - after) * c, after * c, 0.0f);
        }
      }
    }
  }
}

void Col2ImImages(const WindowGeometry& g, const float* cols, float* x,
                  int64_t first, int64_t last) {
  const int64_t c = g.c, row_len = g.patch_cols(), image_size = g.h * g.w * c;
  std::fill(x + first * image_size, x + last * image_size, 0.0f);
  for (int64_t img = first; img < last; ++img) {
    float* image = x + img * image_size;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float* row = cols + ((img * g.oh + oy) * g.ow + ox) * row_len;
        const Clip w = ClipWindow(g, oy, ox);
        for (int64_t iy = w.y0; iy < w.y1; ++iy) {
          const int64_t ky = w.ky0 + iy - w.y0;
          const float* src = row + (ky * g.kw + w.kx0) * c;
          float* dst = image + (iy * g.w + w.x0) * c;
          const int64_t count = (w.x1 - w.x0) * c;
          for (int64_t i = 0; i < count; ++i) dst[i] += src[i];
        }
      }
    }
  }
}

void Im2Col(CpuThreadPool& pool, const WindowGeometry& g, const float* x,
            float* cols) {
  pool.ParallelFor(g.n, Grain(g.oh * g.ow * g.patch_cols()),
                   [&](int, int64_t first, int64_t last) {
                     Im2ColImages(g, x, cols, first, last);
                   });
}

void Col2Im(CpuThreadPool& pool, const WindowGeometry& g, const float* cols,
            float* x) {
  pool.ParallelFor(g.n, Grain(g.oh * g.ow * g.patch_cols()),
                   [&](int, int64_t first, int64_t last) {
                     Col2ImImages(g, cols, x, first, last);
                   });
}

void Pool(CpuThreadPool& pool, PoolKind kind, const WindowGeometry& g,
          const float* x, float* y) {
  const int64_t c = g.c;
  pool.ParallelFor(
      g.n, Grain(g.h * g.w * c), [&](int, int64_t first, int64_t last) {
        std::vector<double> sums(kind == PoolKind::kAverage ? c : 0);
        for (int64_t img = first; img < last; ++img) {
          const float* image = x + img * g.h * g.w * c;
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              float* out = y + ((img * g.oh + oy) * g.ow + ox) * c;
              const Clip w = ClipWindow(g, oy, ox);
              if (kind == PoolKind::kMax) {
                std::fill_n(out, c, -std::numeric_limits<float>::infinity());
                for (int64_t iy = w.y0; iy < w.y1; ++iy) {
                  for (int64_t ix = w.x0; ix < w.x1; ++ix) {
                    const float* v = image + (iy * g.w + ix) * c;
                    for (int64_t ch = 0; ch < c; ++ch) {
                      out[ch] = v[ch] > out[ch] ? v[ch] : out[ch];
                    }
                  }
                }
              } else {
                std::fill(sums.begin(), sums.end(), 0.0);
                for (int64_t iy = w.y0; iy < w.y1; ++iy) {
                  for (int64_t ix = w.x0; ix < w.x1; ++ix) {
                    const float* v = image + (iy * g.w + ix) * c;
                    for (int64_t ch = 0; ch < c; ++ch) sums[ch] += v[ch];
                  }
                }
                const double count = double(w.y1 - w.y0) * double(w.x1 - w.x0);
                for (int64_t ch = 0; ch < c; ++ch) {
                  out[ch] = static_cast<float>(sums[ch] / count);
                }
              }
            }
          }
        }
      });
}

void PoolBackward(CpuThreadPool& pool, PoolKind kind, const WindowGeometry& g,
                  const float* x, const float* y, const float* dy, float* dx) {
  const int64_t c = g.c, image_size = g.h * g.w * c;
  pool.ParallelFor(
      g.n, Grain(2 * image_size), [&](int, int64_t first, int64_t last) {
        std::fill(dx + first * image_size, dx + last * image_size, 0.0f);
        std::vector<bool> routed(kind == PoolKind::kMax ? c : 0);
        for (int64_t img = first; img < last; ++img) {
          const float* image = x + img * g.h * g.w * c;
          float* grad = dx + img * g.h * g.w * c;
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              const int64_t at = ((img * g.oh + oy) * g.ow + ox) * c;
              const float* out = y + at;
              const float* out_grad = dy + at;
              const Clip w = ClipWindow(g, oy, ox);
              if (kind == PoolKind::kMax) {
                // The first element (in window order) equal to the maximum.
                std::fill(routed.begin(), routed.end(), false);
                for (int64_t iy = w.y0; iy < w.y1; ++iy) {
                  for (int64_t ix = w.x0; ix < w.x1; ++ix) {
                    const int64_t offset = (iy * g.w + ix) * c;
                    for (int64_t ch = 0; ch < c; ++ch) {
                      if (!routed[ch] && image[offset + ch] == out[ch]) {
                        routed[ch] = true;
                        grad[offset + ch] += out_grad[ch];
                      }
                    }
                  }
                }
              } else {
                const float share =
                    1.0f / static_cast<float>((w.y1 - w.y0) * (w.x1 - w.x0));
                for (int64_t iy = w.y0; iy < w.y1; ++iy) {
                  for (int64_t ix = w.x0; ix < w.x1; ++ix) {
                    float* dst = grad + (iy * g.w + ix) * c;
                    for (int64_t ch = 0; ch < c; ++ch) {
                      dst[ch] += out_grad[ch] * share;
                    }
                  }
                }
              }
            }
          }
        }
      });
}

void ChannelMoments(CpuThreadPool& pool, int64_t rows, int64_t channels,
                    const float* x, float* mean, float* var) {
  // Two passes in double: the mean, then squared deviations from it (no
  // cancellation, unlike E[x^2] - E[x]^2). Each chunk of rows sums into
  // its own partials, added up in chunk order. A chunk sums in a vector of
  // its own and stores it once at the end: chunks' partials share cache
  // lines, and writing them row by row made two threads slower than one.
  const int64_t grain = Grain(channels);
  const int chunks = pool.Chunks(rows, grain);
  std::vector<double> partial(chunks * channels, 0.0);
  pool.ParallelFor(rows, grain, [&](int chunk, int64_t begin, int64_t end) {
    std::vector<double> sum(channels, 0.0);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * channels;
      for (int64_t ch = 0; ch < channels; ++ch) sum[ch] += row[ch];
    }
    std::copy(sum.begin(), sum.end(), partial.begin() + chunk * channels);
  });
  const double count = static_cast<double>(std::max<int64_t>(rows, 1));
  std::vector<double> mu(channels, 0.0);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      mu[ch] += partial[chunk * channels + ch];
    }
  }
  for (int64_t ch = 0; ch < channels; ++ch) mu[ch] /= count;
  std::fill(partial.begin(), partial.end(), 0.0);
  pool.ParallelFor(rows, grain, [&](int chunk, int64_t begin, int64_t end) {
    std::vector<double> sq(channels, 0.0);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * channels;
      for (int64_t ch = 0; ch < channels; ++ch) {
        const double d = row[ch] - mu[ch];
        sq[ch] += d * d;
      }
    }
    std::copy(sq.begin(), sq.end(), partial.begin() + chunk * channels);
  });
  for (int64_t ch = 0; ch < channels; ++ch) {
    double sq = 0;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      sq += partial[chunk * channels + ch];
    }
    mean[ch] = static_cast<float>(mu[ch]);
    var[ch] = static_cast<float>(sq / count);
  }
}

void BatchNormApply(CpuThreadPool& pool, int64_t rows, int64_t channels,
                    const float* x, const float* mean, const float* var,
                    float epsilon, const float* gamma, const float* beta,
                    float* y) {
  // y = x * scale + shift per channel.
  std::vector<float> scale(channels), shift(channels);
  for (int64_t ch = 0; ch < channels; ++ch) {
    const float inv_std = 1.0f / std::sqrt(var[ch] + epsilon);
    scale[ch] = (gamma != nullptr ? gamma[ch] : 1.0f) * inv_std;
    shift[ch] = (beta != nullptr ? beta[ch] : 0.0f) - mean[ch] * scale[ch];
  }
  pool.ParallelFor(rows, Grain(channels), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * channels;
      float* out = y + r * channels;
      for (int64_t ch = 0; ch < channels; ++ch) {
        out[ch] = in[ch] * scale[ch] + shift[ch];
      }
    }
  });
}

void BatchNormBackward(CpuThreadPool& pool, int64_t rows, int64_t channels,
                       const float* x, const float* mean, const float* var,
                       float epsilon, const float* gamma, const float* dy,
                       float* dx, float* dgamma, float* dbeta) {
  std::vector<float> inv_std(channels);
  for (int64_t ch = 0; ch < channels; ++ch) {
    inv_std[ch] = 1.0f / std::sqrt(var[ch] + epsilon);
  }
  // Per chunk: sum(dy) in the first `channels` partials, sum(dy * x_hat)
  // in the next (summed locally and stored once, as in ChannelMoments).
  const int64_t grain = Grain(2 * channels);
  const int chunks = pool.Chunks(rows, grain);
  std::vector<double> partial(chunks * 2 * channels, 0.0);
  pool.ParallelFor(rows, grain, [&](int chunk, int64_t begin, int64_t end) {
    std::vector<double> sums(2 * channels, 0.0);
    double* sum_dy = sums.data();
    double* sum_dy_xhat = sum_dy + channels;
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * channels;
      const float* g = dy + r * channels;
      for (int64_t ch = 0; ch < channels; ++ch) {
        sum_dy[ch] += g[ch];
        sum_dy_xhat[ch] += double(g[ch]) * ((in[ch] - mean[ch]) * inv_std[ch]);
      }
    }
    std::copy(sums.begin(), sums.end(), partial.begin() + chunk * 2 * channels);
  });
  std::vector<double> sum_dy(channels, 0.0), sum_dy_xhat(channels, 0.0);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const double* part = partial.data() + chunk * 2 * channels;
    for (int64_t ch = 0; ch < channels; ++ch) {
      sum_dy[ch] += part[ch];
      sum_dy_xhat[ch] += part[channels + ch];
    }
  }
  // dx = gamma * inv_std / N * (N * dy - sum(dy) - x_hat * sum(dy * x_hat)).
  const float count = static_cast<float>(std::max<int64_t>(rows, 1));
  std::vector<float> k(channels), mean_dy(channels), mean_dy_xhat(channels);
  for (int64_t ch = 0; ch < channels; ++ch) {
    k[ch] = (gamma != nullptr ? gamma[ch] : 1.0f) * inv_std[ch];
    mean_dy[ch] = static_cast<float>(sum_dy[ch] / count);
    mean_dy_xhat[ch] = static_cast<float>(sum_dy_xhat[ch] / count);
  }
  pool.ParallelFor(rows, grain, [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * channels;
      const float* g = dy + r * channels;
      float* out = dx + r * channels;
      for (int64_t ch = 0; ch < channels; ++ch) {
        const float x_hat = (in[ch] - mean[ch]) * inv_std[ch];
        out[ch] = k[ch] * (g[ch] - mean_dy[ch] - x_hat * mean_dy_xhat[ch]);
      }
    }
  });
  for (int64_t ch = 0; ch < channels; ++ch) {
    if (dgamma != nullptr) dgamma[ch] = static_cast<float>(sum_dy_xhat[ch]);
    if (dbeta != nullptr) dbeta[ch] = static_cast<float>(sum_dy[ch]);
  }
}

}  // namespace psflow::cpu
