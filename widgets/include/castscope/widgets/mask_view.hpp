// Mask view: a MaskImage (N:M keep-mask, or values the cast zeroed) drawn as a texture that
// fills its panel, with element-index axes, zoom (mouse wheel), pan (drag) and a hover tooltip.
#pragma once

#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

struct MaskViewState {
  GridView view;
  float drag_px = 0;
  int64_t hover_row = -1, hover_col = -1;  // the mask cell under the mouse (-1: none)
  const void* source = nullptr;
  Texture tex;
};

void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size);

}  // namespace castscope::widgets
