// The zoomable image that the tile map and the mask view share: a texture of grid cells filling
// the given size, element-index axes on its left and bottom, tile / element lines once they are
// far enough apart, and the mouse handling (wheel zoom, drag pan, hover, click).
#pragma once

#include <imgui.h>

#include <functional>
#include <optional>

#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/texture.hpp"

namespace castscope::widgets {

struct GridImage {
  ImVec2 p0;  // top-left of the image on screen
  GridGeom g;
  std::optional<GridHit> hit;  // under the mouse
  bool clicked = false;        // pressed and released on the image without dragging
};

// geom: rows / cols / cell and element extents (width and height are set here from size).
// overlay (optional) draws over the texture, under the tile and element lines.
// `label` names the image's item (what scripted tests find it by).
GridImage draw_grid_image(const char* label, GridView& view, float& drag_px, const Texture& tex,
                          GridGeom geom, ImVec2 size,
                          const std::function<void(ImDrawList*, const GridImage&)>& overlay = {});

// Outlines cell (row, col) of an image drawn by draw_grid_image.
void outline_cell(const GridImage& im, const GridView& view, int64_t row, int64_t col, ImU32 color);

}  // namespace castscope::widgets
