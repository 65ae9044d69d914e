// Mask view: a MaskImage (N:M keep-mask, or values the cast zeroed) drawn as a texture.
#pragma once

#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

struct MaskViewState {
  const void* source = nullptr;
  Texture tex;
};

void draw_mask_view(const char* id, MaskViewState& s, const MaskImage& m, ImVec2 size);

}  // namespace castscope::widgets
