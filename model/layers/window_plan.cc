#include "model/layers/window_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<WindowGeometry> PlanWindow(const Shape& input,
                                          const Window2D& window) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("takes height x width x channels images, its input is ",
                     ShapeString(input)));
  }
  WindowGeometry g;
  g.n = 1, g.h = input[0], g.w = input[1], g.c = input[2];
  g.kh = window.kh, g.kw = window.kw, g.sh = window.sh, g.sw = window.sw;
  if (window.padding == Padding::kSame) {
    g.oh = (g.h + g.sh - 1) / g.sh;
    g.ow = (g.w + g.sw - 1) / g.sw;
    g.pad_top = std::max<int64_t>((g.oh - 1) * g.sh + g.kh - g.h, 0) / 2;
    g.pad_left = std::max<int64_t>((g.ow - 1) * g.sw + g.kw - g.w, 0) / 2;
    return g;
  }
  if (g.kh > g.h || g.kw > g.w) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its ", g.kh, "x", g.kw, " window is larger than its ", g.h, "x", g.w,
        " input; use a smaller window, padding \"same\", or less "
        "downsampling before it"));
  }
  g.oh = (g.h - g.kh) / g.sh + 1;
  g.ow = (g.w - g.kw) / g.sw + 1;
  return g;
}

}  // namespace psflow
