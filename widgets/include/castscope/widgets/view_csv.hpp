// Every view's data as CSV (header line, then one line per bin, tile or mask cell), for the
// views panel's "Save view data". `other`: a second datatype's analysis of the same tensor,
// written as extra columns where the view overlays it (null: none).
#pragma once

#include <string>

#include "castscope/widgets/analysis.hpp"

namespace castscope::widgets {

std::string value_histogram_csv(const Analysis& a, const Analysis* other, bool log_x);
std::string exponent_histogram_csv(const Analysis& a, const Analysis* other);
std::string error_histogram_csv(const Analysis& a, const Analysis* other);
std::string tile_map_csv(const Analysis& a);  // header only when there is no tile map
std::string mask_csv(const Analysis& a);

}  // namespace castscope::widgets
