// Clipped elements per tile, for the tile map's hover: a tile's finite inputs whose scaled
// magnitude rounds past the element format's largest value. The cast counts clipped values for
// the whole tensor only; the per-tile count is kept only when its sum reproduces that total.
#pragma once

#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"

namespace castscope::widgets {

// x: the float32 input, q: its cast values (input shape), m: the cast's tile map, r: the cast.
// Returns one count per tile, or nothing with *why set when the count cannot be made for this
// datatype or does not add up to r.counts.clipped.
struct View2D;

// Whether xs, an input over its group's whole scale (tile scale x tensor scale), saturates when
// the cast rounds it onto d's element grid under `round`: the engine's own quantizer decides, so
// the teaching view, the tile map and the cast's clipped count mean the same. xs is in the units
// of the grid the cast quantizes on, whose largest value clip_grid_max gives (the integer grid of
// an int element under a float scale).
bool clips_after_rounding(const DataType& d, Round round, double xs);
double clip_grid_max(const DataType& d);

// The tiles lie on `view`, the tensor's 2-D view [outputs, reduction] (analysis.hpp).
std::vector<int64_t> tile_clipped(const Tensor& x, const View2D& view, const TileMap& m,
                                  const CastResult& r, std::string* why);

}  // namespace castscope::widgets
