// Per-tile scale heatmap: a TileMap drawn as a texture that fills its panel, with element-index
// axes, a colour bar with ticks, zoom (mouse wheel) down to single elements and pan (drag);
// hovering shows the tile's index, element range, scale code and value, SNR and clipped count.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "castscope/metrics.hpp"
#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

// Mapping: a codebook's chosen mapping per tile (categorical colours; grey for other datatypes).
enum class HeatField { ScaleLog2, Absmax, Snr, Mapping };

struct HeatmapState {
  HeatField field = HeatField::ScaleLog2;
  GridView view;  // zoom and pan (plot_math.hpp)
  // What the mouse did in the last frame, for the owner and for scripted tests: the hovered tile
  // (-1: none) and element, the last tile clicked (-1: none yet).
  int64_t hovered = -1;
  int64_t hover_row = -1, hover_col = -1;
  int64_t clicked = -1;
  float drag_px = 0;  // distance dragged since the button went down (a click moves < 4 px)
  float screen[4] = {0, 0, 0, 0};  // the map's image last frame: x, y, width, height (pixels)
  // Cache: the texture is rebuilt only when the source, field or marks change.
  const void* source = nullptr;
  const void* marks_source = nullptr;
  HeatField built_field = HeatField::ScaleLog2;
  float vmin = 0, vmax = 0;
  Texture tex;
  std::string upload_error;
};

// What a tile's hover tooltip says beyond the tile map itself.
struct HeatmapExtras {
  const std::vector<uint8_t>* marks = nullptr;    // tiles to highlight; the others greyed
  const std::vector<int64_t>* clipped = nullptr;  // clipped elements per tile
  std::string clipped_note;                       // why clipped is absent
  int64_t elem_rows = 0, elem_cols = 0;           // the tensor's 2-D extent (0: the tiles')
  double tensor_scale = NAN;                      // a two-level datatype's tensor scale (NaN: none)
};

// The colour bar's caption for a field ("log2 of the tile scale", ...).
const char* heat_unit(HeatField field);

// The value of a tile shown for `field` (log2 of the scale, absmax, or SNR in dB).
float heat_value(const TileMap& m, HeatField field, size_t k);
// A distinct colour per codebook mapping index (heatmap and teaching view agree).
uint32_t mapping_colour(int index);
// The colour value range over finite tiles.
void heat_range(const TileMap& m, HeatField field, float* lo, float* hi);

// Draws the map filling `size` (zoom: mouse wheel, pan: drag, hover: tooltip). Returns the tile
// clicked this frame (a press and release that moved under 4 px), else -1.
int64_t draw_heatmap(const char* id, HeatmapState& s, const TileMap* map, const std::string& note,
                     ImVec2 size, const HeatmapExtras& extras = {});

}  // namespace castscope::widgets
