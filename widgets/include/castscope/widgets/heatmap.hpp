// Per-tile scale heatmap: a TileMap drawn as a texture with zoom (mouse wheel) and pan (drag);
// hovering shows the tile's index, scale code and value, absmax and SNR.
#pragma once

#include <string>
#include <vector>

#include "castscope/metrics.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

// Mapping: a codebook's chosen mapping per tile (categorical colours; grey for other datatypes).
enum class HeatField { ScaleLog2, Absmax, Snr, Mapping };

struct HeatmapState {
  HeatField field = HeatField::ScaleLog2;
  float zoom = 1.0f;           // >= 1
  float u0 = 0.0f, v0 = 0.0f;  // top-left of the visible window in texture coordinates
  // Cache: the texture is rebuilt only when the source, field or marks change.
  const void* source = nullptr;
  const void* marks_source = nullptr;
  HeatField built_field = HeatField::ScaleLog2;
  float vmin = 0, vmax = 0;
  Texture tex;
  std::string upload_error;
};

// The value of a tile shown for `field` (log2 of the scale, absmax, or SNR in dB).
float heat_value(const TileMap& m, HeatField field, size_t k);
// A distinct colour per codebook mapping index (heatmap and teaching view agree).
uint32_t mapping_colour(int index);
// The colour value range over finite tiles.
void heat_range(const TileMap& m, HeatField field, float* lo, float* hi);

// marks (optional, one byte per tile): tiles to highlight; the others are drawn greyed.
void draw_heatmap(const char* id, HeatmapState& s, const TileMap* map, const std::string& note,
                  ImVec2 size, const std::vector<uint8_t>* marks = nullptr);

}  // namespace castscope::widgets
