// Mask view: a MaskImage (N:M keep-mask, or values the cast zeroed) drawn as a texture that
// fills its panel, with element-index axes, zoom (mouse wheel), pan (drag) and a hover tooltip.
#pragma once

#include <functional>
#include <vector>

#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

// The exact mask of a block of elements, rows [r0, r0 + h) x columns [c0, c0 + w) of the 2-D
// view (out: h * w bytes, 1 where set). Returns false when the elements are not at hand.
using MaskDetail =
    std::function<bool(int64_t r0, int64_t c0, int64_t h, int64_t w, std::vector<uint8_t>* out)>;

struct MaskViewState {
  GridView view;
  float drag_px = 0;
  float screen[4] = {0, 0, 0, 0};          // the image last frame: x, y, width, height (pixels)
  int64_t hover_row = -1, hover_col = -1;  // the mask cell under the mouse (-1: none)
  int64_t hover_elem_row = -1, hover_elem_col = -1;
  bool drawn = false;  // last frame drew the mask's image (its texture, at a visible size)
  const void* source = nullptr;
  Texture tex;
  // Element-level detail of the visible block once zoomed in that far.
  bool detail_shown = false;
  int64_t detail_key[5] = {-1, -1, -1, -1, -1};  // source, r0, c0, h, w of the cached block
  std::vector<uint8_t> detail;
  Texture detail_tex;
};

// Zoomed in to at most kMaskDetailSide elements per side, a reduced mask (cells of several
// elements) shows the visible elements themselves when `detail` can provide them.
constexpr int64_t kMaskDetailSide = 512;
void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size,
                    const MaskDetail& detail = {});

}  // namespace castscope::widgets
