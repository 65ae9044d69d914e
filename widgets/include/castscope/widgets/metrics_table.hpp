// Metrics table: the error statistics of one cast, exact values in tooltips.
#pragma once

#include "castscope/metrics.hpp"

namespace castscope::widgets {

void draw_metrics_table(const char* id, const Stats& s, double bits_per_value);

}  // namespace castscope::widgets
