// Exact storage of a cast tensor (castscope/storage_bits.hpp): the one size every plan estimate
// uses.
#include "castscope/storage_bits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "families/family_table.hpp"
#include "families/ggml/ggml_types.hpp"
#include "core/plan.hpp"

namespace castscope {

uint64_t storage_bits(const DataType& d, const Shape& shape, const CastOptions& o) {
  const int64_t n = numel(shape);
  if (n <= 0) return 0;
  const CastOptions r = resolve_axis(o, shape);
  const uint64_t un = static_cast<uint64_t>(n);
  const int64_t len = std::max<int64_t>(axis_length(r, shape), 1);
  const uint64_t rows = static_cast<uint64_t>(n / len);
  return detail::family_ops(d.family()).storage_bits(d, un, rows, len, shape, r);
}

std::string bits_label(const DataType& d, const Shape& shape, const CastOptions& o) {
  const int64_t n = numel(shape);
  const double exact = n > 0 ? static_cast<double>(storage_bits(d, shape, o)) / n : 0.0;
  const double nominal = d.bits_per_value();
  char buf[96];
  if (std::abs(exact - nominal) < 5e-4) {
    std::snprintf(buf, sizeof buf, "%.4g", exact);
  } else {
    const int64_t len = axis_length(resolve_axis(o, shape), shape);
    std::snprintf(buf, sizeof buf, "nominal %.4g, on rows of %lld: %.4g", nominal,
                  static_cast<long long>(len), exact);
  }
  return buf;
}

namespace detail {

namespace {
// Blocks of `t` values along the quantization axis: a partial block at a row's end is whole.
uint64_t blocks(uint64_t rows, int64_t len, int64_t t) {
  return rows * static_cast<uint64_t>((len + t - 1) / t);
}
}  // namespace

uint64_t codebook_storage_bits(const DataType& d, uint64_t un, uint64_t rows, int64_t len,
                               const Shape&, const CastOptions&) {
  const TileSpec& t = d.scale()->tiles[0];
  const Codebook& cb = *d.codebook();
  const uint64_t tiles = blocks(rows, len, t.size);
  const uint64_t maps = t.sub ? tiles * static_cast<uint64_t>(t.size / t.sub) : tiles;
  return un * static_cast<uint64_t>(cb.index_bits) +
         tiles * static_cast<uint64_t>(d.scale()->scale.bits()) +
         maps * static_cast<uint64_t>(cb.meta_bits);
}

uint64_t ggml_storage_bits(const DataType& d, uint64_t, uint64_t rows, int64_t len, const Shape&,
                           const CastOptions&) {
  const ggml::TypeInfo* g = ggml::type_info(d.ggml_type());
  return blocks(rows, len, g->block) * g->block_bytes * 8;
}

uint64_t standard_storage_bits(const DataType& d, uint64_t un, uint64_t rows, int64_t len,
                               const Shape& shape, const CastOptions& r) {
  const uint64_t vbits = static_cast<uint64_t>(d.number().bits());
  if (!d.scaled()) return un * vbits;
  const detail::CastPlan p = r.flatten
                                 ? detail::make_plan(cast_view_shape(shape, r), d, view_options(r))
                                 : detail::make_plan(shape, d, r);
  uint64_t bits = un * vbits;
  if (p.sp_m > 0) {
    // n of every m values kept, plus one mask bit per value. Along the axis a row's partial
    // last run keeps n slots too, as the packed codes hold them.
    const uint64_t kept = d.sparse_tile() == &d.scale()->tiles.back()
                              ? blocks(rows, len, p.sp_m) * static_cast<uint64_t>(p.sp_n)
                              : (un / p.sp_m) * p.sp_n + std::min<uint64_t>(un % p.sp_m, p.sp_n);
    bits = kept * vbits + un;
  }
  const ScaleSpec& sc = *d.scale();
  uint64_t per_group = static_cast<uint64_t>(sc.scale.bits());
  if (d.has_zero_point()) per_group += static_cast<uint64_t>(sc.second->bits());
  bits += static_cast<uint64_t>(p.groups()) * per_group;
  if (d.multiscale()) bits += static_cast<uint64_t>(sc.second->bits());  // the tensor scale
  if (p.sub)
    bits += static_cast<uint64_t>(p.B * p.R * p.gc * (p.tc / p.sub)) *
            static_cast<uint64_t>(p.offset_bits);
  return bits;
}

}  // namespace detail
}  // namespace castscope
