#include "families/codebook/cb_cast.hpp"

#include <atomic>
#include <cmath>

#include "families/codebook/cb_lut.hpp"
#include "core/plan.hpp"
#include "core/parallel.hpp"

namespace castscope::codebook {
namespace {

Shape meta_perm_of(const detail::CastPlan& p, int64_t subs_per_row) {
  Shape s = p.perm_shape;
  s.back() = subs_per_row;
  return s;
}

// Low `width` bits of each byte along the last axis, little end first (as sub-byte codes).
Tensor pack_last(const Tensor& t, int width) {
  if (width == 8) return t;
  const Shape& s = t.shape();
  const int64_t last = s.back(), rows = t.numel() / last, per = 8 / width;
  Shape o = s;
  o.back() = (last + per - 1) / per;
  Tensor out = Tensor::empty(DType::U8, o);
  const uint8_t* in = t.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  const unsigned mask = (1u << width) - 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < last; ++k)
      dst[r * o.back() + k / per] |=
          static_cast<uint8_t>((in[r * last + k] & mask) << ((k % per) * width));
  return out;
}

Tensor unpack_last(const Tensor& t, int width, const Shape& shape, const char* what) {
  if (!t) throw Error(std::string("compressed codebook result has no ") + what + " tensor");
  if (dtype_size(t.dtype()) != 1)
    throw Error(std::string("compressed codebook ") + what + " tensor must hold bytes, not " +
                dtype_name(t.dtype()));
  const int64_t last = shape.empty() ? 1 : shape.back();
  const int64_t rows = numel(shape) / last, per = 8 / width, plast = (last + per - 1) / per;
  if (t.numel() != rows * plast)
    throw Error(std::string("compressed codebook ") + what + " tensor has " +
                std::to_string(t.numel()) + " bytes, expected " + std::to_string(rows * plast));
  Tensor out = Tensor::empty(DType::U8, shape);
  const uint8_t* in = t.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < last; ++k)
      dst[r * last + k] = static_cast<uint8_t>((in[r * plast + k / per] >> ((k % per) * width)) &
                                               ((1u << width) - 1));
  return out;
}

}  // namespace

int packed_width(int bits) {
  return bits <= 1 ? 1 : bits <= 2 ? 2 : bits <= 4 ? 4 : 8;
}

Layout make_layout(const Shape& shape, const DataType& d, const CastOptions& opt) {
  if (!d.codebook()) throw Error("datatype " + d.str() + " is not a codebook datatype");
  const TileSpec& t = d.scale()->tiles[0];
  ScaleSpec plain{d.scale()->scale, std::nullopt, {TileSpec{t.size}}};
  Layout l;
  l.plan = detail::make_plan(shape, DataType::make(d.number(), plain), opt);
  l.tile = t.size;
  l.sub = t.sub ? t.sub : t.size;
  l.subs_per_row = l.plan.gc * (l.tile / l.sub);
  l.meta_perm_shape = meta_perm_of(l.plan, l.subs_per_row);
  l.meta_shape = l.plan.scale_shape;
  l.meta_shape[l.plan.perm.back()] = l.subs_per_row;
  const Codebook& cb = *d.codebook();
  const int half = cb.num_values() / 2;
  for (const auto& m : cb.maps)
    for (int j = 0; j < half; ++j) l.mags.push_back(m[half + j]);
  l.base.kp = detail::kernel_params(l.plan);
  // Codebook values round at the mappings' midpoints, never by the element round mode; scales
  // round to nearest even (group.hpp).
  l.base.kp.round = scalar::Round::Even;
  l.base.half = half;
  l.base.nmaps = cb.num_maps();
  l.base.tile = l.tile;
  l.base.sub = l.sub;
  return l;
}

Tensor permuted_input(const Tensor& x, const Layout& l) {
  if (!dtype_is_float(x.dtype()))
    throw Error(std::string("cast input must be a float tensor (got ") + dtype_name(x.dtype()) +
                ")");
  const detail::CastPlan& p = l.plan;
  Tensor src = x.dtype() == DType::F64 || x.dtype() == DType::F32 ? x : x.to_f32();
  if (!p.permuted) return src;
  Tensor t = Tensor::empty(src.dtype(), p.perm_shape);
  detail::permute(src.data(), t.mutable_data(), dtype_size(src.dtype()), p.in_shape, p.perm);
  return t;
}

CastResult assemble(const Tensor& x, const DataType& d, const CastOptions& opt, const Layout& l,
                    const Tensor& values, const Tensor& codes, const Tensor& scale,
                    const Tensor& meta, const CastCounts& counts) {
  const detail::CastPlan& p = l.plan;
  CastResult r;
  r.dtype = d;
  r.options = opt;
  r.shape = x.shape();
  r.mode = opt.mode == CastMode::Virtual ? CastMode::Virtual : CastMode::Actual;
  r.counts = counts;
  if (r.mode == CastMode::Virtual) {
    r.values = detail::restored(values, p, x.shape());
    return r;
  }
  r.codes = detail::restored(codes, p, x.shape());
  Shape ss = p.perm_shape;
  ss.back() = p.gc;
  r.scale = detail::restored(scale.reshaped(ss), p, p.scale_shape);
  r.meta = detail::restored(meta, p, l.meta_shape);
  return r;
}

CastResult cast(const Tensor& x, const DataType& d, const CastOptions& opt) {
  const Layout l = make_layout(x.shape(), d, opt);
  const detail::CastPlan& p = l.plan;
  const detail::cb::Params cp = l.params();
  const Tensor src = permuted_input(x, l);
  const bool actual = opt.mode != CastMode::Virtual;
  Tensor values, codes, scale, meta;
  if (actual) {
    codes = Tensor::empty(DType::U8, p.perm_shape);
    scale = Tensor::empty(p.scale_dtype, {p.B * p.R * p.gc});
    meta = Tensor::empty(DType::U8, l.meta_perm_shape);
  } else {
    values = Tensor::empty(DType::F32, p.perm_shape);
  }
  const bool f64 = src.dtype() == DType::F64;
  // The interval tables where they apply (the CUDA kernel's too); encode_tile otherwise.
  const detail::cb::Lut lut = detail::cb::build_lut(cp);
  std::atomic<int64_t> clipped{0}, nonfinite{0};
  detail::parallel_for(p.B * p.R * p.gc, 256, opt.threads, opt.job, [&](int64_t gb, int64_t ge) {
    std::vector<double> xb(l.tile);
    std::vector<uint8_t> kb(l.tile);
    int64_t clip = 0, nf = 0;
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t row = g / p.gc, c0 = (g % p.gc) * l.tile;
      const int n = static_cast<int>(std::min<int64_t>(l.tile, p.C - c0));
      const int64_t first = row * p.C + c0;
      for (int i = 0; i < n; ++i)
        xb[i] = f64 ? src.ptr<double>()[first + i] : src.ptr<float>()[first + i];
      uint8_t* cd = actual ? codes.mutable_ptr<uint8_t>() + first : nullptr;
      float* vd = actual ? nullptr : values.mutable_ptr<float>() + first;
      uint8_t* md = actual ? meta.mutable_ptr<uint8_t>() : nullptr;
      const detail::cb::TileResult tr =
          lut.ok ? detail::cb::encode_tile_lut(cp, lut, xb.data(), n, l.subs_per_row, row, c0, cd,
                                               vd, md, kb.data())
                 : detail::cb::encode_tile(cp, xb.data(), n, l.subs_per_row, row, c0, cd, vd, md);
      clip += tr.clipped;
      nf += tr.nonfinite;
      if (actual)
        detail::store_code(scale.mutable_data(), p.scale_dtype, g, tr.scale_code, p.scale);
    }
    clipped += clip;
    nonfinite += nf;
  });
  CastCounts counts;
  counts.clipped = clipped;
  counts.nonfinite = nonfinite;
  return assemble(x, d, opt, l, values, codes, scale, meta, counts);
}

void validate_actual(const CastResult& a, const Layout& l) {
  auto need = [&](const Tensor& t, const char* what, DType dt, const Shape& s) {
    if (!t) throw Error("cast result of " + a.dtype.str() + " has no " + what + " tensor");
    if (t.dtype() != dt || t.shape() != s)
      throw Error("cast result of " + a.dtype.str() + ": " + what + " tensor is " +
                  dtype_name(t.dtype()) + " " + shape_str(t.shape()) + ", expected " +
                  dtype_name(dt) + " " + shape_str(s));
  };
  need(a.codes, "codes", DType::U8, a.shape);
  need(a.scale, "scale", l.plan.scale_dtype, l.plan.scale_shape);
  need(a.meta, "meta", DType::U8, l.meta_shape);
}

Tensor upcast(const CastResult& a) {
  const Layout l = make_layout(a.shape, a.dtype, a.options);
  const detail::CastPlan& p = l.plan;
  const detail::cb::Params cp = l.params();
  validate_actual(a, l);
  const Codebook& cb = *a.dtype.codebook();
  Tensor codes = detail::permuted(a.codes, p), scale = detail::permuted(a.scale, p),
         meta = detail::permuted(a.meta, p);
  Tensor values = Tensor::empty(DType::F32, p.perm_shape);
  float* out = values.mutable_ptr<float>();
  const uint8_t* cd = codes.ptr<uint8_t>();
  const uint8_t* md = meta.ptr<uint8_t>();
  for (int64_t i = 0; i < meta.numel(); ++i)
    if (md[i] >= cb.num_maps())
      throw Error("cast result of " + a.dtype.str() + ": meta entry " + std::to_string(i) +
                  " selects mapping " + std::to_string(md[i]) + " of " +
                  std::to_string(cb.num_maps()));
  for (int64_t i = 0; i < codes.numel(); ++i)
    if (cd[i] >= cb.num_values())
      throw Error("cast result of " + a.dtype.str() + ": code " + std::to_string(i) + " is " +
                  std::to_string(cd[i]) + ", beyond the " + std::to_string(cb.num_values()) +
                  " entries of a mapping");
  detail::parallel_for(p.numel(), 1 << 15, a.options.threads, nullptr, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t row = i / p.C, c = i % p.C;
      const int64_t g = row * p.gc + c / l.tile;
      const uint32_t sc = detail::load_code(scale.data(), p.scale_dtype, g, p.scale);
      const detail::GroupScale gs = detail::scale_from_codes(cp.kp, sc, 0);
      out[i] = detail::cb::decode(cp, gs, md[row * l.subs_per_row + c / l.sub], cd[i]);
    }
  });
  return detail::restored(values, p, a.shape);
}

// Packed codebook: indices of I bits and mapping choices of M bits packed along the last axis
// little end first (1, 2, 4 or 8 bits a slot); scales as in actual mode.
CastResult pack(const CastResult& a) {
  if (a.mode == CastMode::Compress) return a;
  if (a.mode != CastMode::Actual) throw Error("pack needs an actual-mode cast result");
  validate_actual(a, make_layout(a.shape, a.dtype, a.options));
  const Codebook& cb = *a.dtype.codebook();
  CastResult r = a;
  r.mode = CastMode::Compress;
  r.codes = pack_last(a.codes.shape().empty() ? a.codes.reshaped({1}) : a.codes,
                      packed_width(cb.index_bits));
  r.meta = pack_last(a.meta, packed_width(cb.meta_bits));
  return r;
}

CastResult unpack(const CastResult& c) {
  if (c.mode == CastMode::Actual) return c;
  if (c.mode != CastMode::Compress) throw Error("unpack needs a compressed cast result");
  const Layout l = make_layout(c.shape, c.dtype, c.options);
  const Codebook& cb = *c.dtype.codebook();
  CastResult r = c;
  r.mode = CastMode::Actual;
  const Shape cs = c.shape.empty() ? Shape{1} : c.shape;
  r.codes = unpack_last(c.codes, packed_width(cb.index_bits), cs, "codes").reshaped(c.shape);
  r.meta = unpack_last(c.meta, packed_width(cb.meta_bits), l.meta_shape, "meta");
  validate_actual(r, l);
  return r;
}

}  // namespace castscope::codebook
