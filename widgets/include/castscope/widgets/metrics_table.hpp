// Metrics table: the error statistics of one cast, exact values in tooltips.
#pragma once

#include <cstdint>

#include "castscope/metrics.hpp"

namespace castscope::widgets {

// bits_per_value: the storage figure on the tensor; nominal and row_length label it where the
// datatype's nominal figure differs on those rows (bits_label).
void draw_metrics_table(const char* id, const Stats& s, double bits_per_value, double nominal,
                        int64_t row_length);

}  // namespace castscope::widgets
