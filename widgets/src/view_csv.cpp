#include "castscope/widgets/view_csv.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace castscope::widgets {

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Columns of a histogram over the same bins; the other analysis' cast column when its bins match.
std::string hist_csv(const Histogram& orig, const Histogram* cast, const Histogram* other,
                     const std::string& other_name, const char* first) {
  const bool with_other = other && other->counts.size() == orig.counts.size() &&
                          other->lo == orig.lo && other->hi == orig.hi;
  std::string s = std::string("bin_lo,bin_hi,") + first + (cast ? ",cast" : "");
  if (with_other) s += ",cast_" + other_name;
  s += "\n";
  const double w = orig.bin_width();
  for (size_t i = 0; i < orig.counts.size(); ++i) {
    s += num(orig.lo + w * i) + "," + num(orig.lo + w * (i + 1)) + "," +
         std::to_string(orig.counts[i]);
    if (cast) s += "," + std::to_string(i < cast->counts.size() ? cast->counts[i] : 0);
    if (with_other) s += "," + std::to_string(other->counts[i]);
    s += "\n";
  }
  return s;
}

}  // namespace

std::string value_histogram_csv(const Analysis& a, const Analysis* other, bool log_x) {
  const std::string on = other ? other->dtype.str() : "";
  if (log_x)
    return hist_csv(a.log_orig, &a.log_cast, other ? &other->log_cast : nullptr, on, "original");
  return hist_csv(a.value_orig, &a.value_cast, other ? &other->value_cast : nullptr, on,
                  "original");
}

std::string error_histogram_csv(const Analysis& a, const Analysis* other) {
  return hist_csv(a.error, nullptr, other ? &other->error : nullptr,
                  other ? other->dtype.str() : "", "count");
}

std::string exponent_histogram_csv(const Analysis& a, const Analysis* other) {
  int lo = a.exp_lo, hi = a.exp_hi;
  if (other) lo = std::min(lo, other->exp_lo), hi = std::max(hi, other->exp_hi);
  auto at = [](const std::vector<uint64_t>& c, int base, int e) -> uint64_t {
    const int i = e - base;
    return i >= 0 && i < static_cast<int>(c.size()) ? c[static_cast<size_t>(i)] : 0;
  };
  std::string s = "binade,magnitude_lo,original,cast";
  if (other) s += ",cast_" + other->dtype.str();
  s += ",representable\n";
  for (int e = lo; e <= hi; ++e) {
    const bool rep = e + 1 > a.rep_lo && e < a.rep_hi;
    s += std::to_string(e) + "," + num(std::ldexp(1.0, e)) + "," +
         std::to_string(at(a.exp_orig, a.exp_lo, e)) + "," +
         std::to_string(at(a.exp_cast, a.exp_lo, e));
    if (other) s += "," + std::to_string(at(other->exp_cast, other->exp_lo, e));
    s += std::string(",") + (rep ? "1" : "0") + "\n";
  }
  s += "zero,0," + std::to_string(a.exp_zero_orig) + "," + std::to_string(a.exp_zero_cast);
  if (other) s += "," + std::to_string(other->exp_zero_cast);
  s += ",1\n";
  return s;
}

std::string tile_map_csv(const Analysis& a) {
  std::string s =
      "tile,tile_row,tile_col,row_first,row_last,col_first,col_last,scale_code,scale_value,"
      "log2_scale,absmax,snr_db,clipped\n";
  if (!a.tiles) return s;
  const TileMap& m = *a.tiles;
  int64_t R = a.view.rows, C = a.view.cols;
  // The folded extent only bounds the ranges when the tiles lie on it.
  if (R > m.rows * m.tile_rows || C > m.cols * m.tile_cols)
    R = m.rows * m.tile_rows, C = m.cols * m.tile_cols;
  const bool clipped = a.tile_clipped.size() == m.scale_value.size();
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) {
      const size_t k = static_cast<size_t>(r * m.cols + c);
      const float sv = m.scale_value[k];
      s += std::to_string(k) + "," + std::to_string(r) + "," + std::to_string(c) + "," +
           std::to_string(r * m.tile_rows) + "," +
           std::to_string(std::min(R, (r + 1) * m.tile_rows) - 1) + "," +
           std::to_string(c * m.tile_cols) + "," +
           std::to_string(std::min(C, (c + 1) * m.tile_cols) - 1) + "," +
           std::to_string(m.scale_code[k]) + "," + num(sv) + "," +
           num(sv > 0 ? std::log2(sv) : NAN) + "," + num(m.absmax[k]) + "," + num(m.snr_db[k]) +
           "," + (clipped ? std::to_string(a.tile_clipped[k]) : std::string()) + "\n";
    }
  return s;
}

std::string mask_csv(const Analysis& a) {
  const MaskImage& m = a.mask;
  std::string s = "cell_row,cell_col,row_first,row_last,col_first,col_last,fraction_set\n";
  for (int64_t r = 0; r < m.out_rows; ++r)
    for (int64_t c = 0; c < m.out_cols; ++c)
      s += std::to_string(r) + "," + std::to_string(c) + "," + std::to_string(r * m.cell_rows) +
           "," + std::to_string(std::min(m.rows, (r + 1) * m.cell_rows) - 1) + "," +
           std::to_string(c * m.cell_cols) + "," +
           std::to_string(std::min(m.cols, (c + 1) * m.cell_cols) - 1) + "," +
           num(m.fraction[static_cast<size_t>(r * m.out_cols + c)]) + "\n";
  return s;
}

}  // namespace castscope::widgets
