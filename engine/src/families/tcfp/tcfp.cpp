#include "castscope/tcfp.hpp"

#include <cmath>
#include <vector>

#include "core/parallel.hpp"
#include "core/plan.hpp"
#include "families/tcfp/tcfp_block.hpp"

namespace castscope::tcfp {
namespace {

using detail::tcfp::BlockParams;
using detail::tcfp::kBlock;
using detail::tcfp::Variant;

Variant variant_of(const DataType& d) {
  switch (family_traits(d.family()).tcfp_bits) {
    case 8:
      return Variant::T8;
    case 12:
      return Variant::T12;
    case 16:
      return Variant::T16;
    default:
      throw Error("datatype " + d.str() + " is not a TCFP datatype");
  }
}

// The block layout of a TCFP cast is that of e4m3fn_e8m0_t32 along the tile axis.
detail::CastPlan block_plan(const Shape& shape, const CastOptions& opt) {
  return detail::make_plan(shape, DataType::parse("e4m3fn_e8m0_t32"), opt);
}

}  // namespace

BlockParams block_params(const DataType& d, const CastOptions& opt, int64_t numel) {
  BlockParams bp;
  bp.variant = variant_of(d);
  bp.fp8 = NumberSpec::parse("e4m3fn").format();
  bp.e8m0 = NumberSpec::parse("e8m0").format();
  // The int4 residual is an exponent-scaled fixed-point value q * 2^-2 (spec decision 7).
  bp.residual = bp.variant == Variant::T12 ? NumberSpec::parse("int4").format() : bp.fp8;
  bp.nf_aware = opt.tcfp_nf_aware;
  bp.round = opt.round;
  bp.seed = opt.seed;
  bp.numel = numel;
  return bp;
}

CastResult cast(const Tensor& x, const DataType& d, const CastOptions& opt) {
  detail::CastPlan p = block_plan(x.shape(), opt);
  const BlockParams bp = block_params(d, opt, p.numel());
  Tensor src = x.dtype() == DType::F64 ? x : (x.dtype() == DType::F32 ? x : x.to_f32());
  if (!dtype_is_float(x.dtype()))
    throw Error(std::string("cast input must be a float tensor (got ") + dtype_name(x.dtype()) +
                ")");
  if (p.permuted) {
    Tensor t = Tensor::empty(src.dtype(), p.perm_shape);
    detail::permute(src.data(), t.mutable_data(), dtype_size(src.dtype()), p.in_shape, p.perm);
    src = t;
  }
  const bool actual = opt.mode != CastMode::Virtual;
  Tensor values, codes, res, scale, rscale;
  if (actual) {
    codes = Tensor::empty(DType::F8E4M3, p.perm_shape);
    scale = Tensor::empty(DType::U8, {p.B * p.gc});
    if (bp.variant != Variant::T8) {
      res = Tensor::empty(bp.variant == Variant::T12 ? DType::I8 : DType::F8E4M3, p.perm_shape);
      rscale = Tensor::empty(DType::U8, {p.B * p.gc});
    }
  } else {
    values = Tensor::empty(DType::F32, p.perm_shape);
  }
  std::atomic<int64_t> clipped{0}, nonfinite{0};
  detail::parallel_for(p.groups(), 1024, opt.threads, opt.job, [&](int64_t gb, int64_t ge) {
    double xb[kBlock];
    uint32_t mc[kBlock], rc[kBlock];
    float vb[kBlock];
    int64_t clip = 0, nf = 0;
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t row = g / p.gc, c0 = (g % p.gc) * kBlock;
      const int n = static_cast<int>(std::min<int64_t>(kBlock, p.C - c0));
      const int64_t first = row * p.C + c0;
      for (int i = 0; i < n; ++i) {
        xb[i] =
            src.dtype() == DType::F64 ? src.ptr<double>()[first + i] : src.ptr<float>()[first + i];
        nf += !std::isfinite(xb[i]);
      }
      auto bc = detail::tcfp::cast_block(bp, xb, n, first, mc, rc, actual ? nullptr : vb, &clip);
      for (int i = 0; i < n; ++i) {
        if (actual) {
          codes.mutable_ptr<uint8_t>()[first + i] = static_cast<uint8_t>(mc[i]);
          if (res)
            detail::store_code(res.mutable_data(), res.dtype(), first + i, rc[i], bp.residual);
        } else {
          values.mutable_ptr<float>()[first + i] = vb[i];
        }
      }
      if (actual) {
        scale.mutable_ptr<uint8_t>()[g] = static_cast<uint8_t>(bc.scale);
        if (rscale) rscale.mutable_ptr<uint8_t>()[g] = static_cast<uint8_t>(bc.rscale);
      }
    }
    clipped += clip;
    nonfinite += nf;
  });
  auto restore = [&](const Tensor& t, const Shape& shape) {
    if (!p.permuted) return t.reshaped(shape);
    Tensor o = Tensor::empty(t.dtype(), shape);
    detail::unpermute(t.data(), o.mutable_data(), dtype_size(t.dtype()), shape, p.perm);
    return o;
  };
  CastResult r;
  r.dtype = d;
  r.options = opt;
  r.shape = x.shape();
  r.mode = opt.mode == CastMode::Virtual ? CastMode::Virtual : CastMode::Actual;
  r.counts.clipped = clipped;
  r.counts.nonfinite = nonfinite;
  if (!actual) {
    r.values = restore(values, x.shape());
    return r;
  }
  r.codes = restore(codes, x.shape());
  r.scale = restore(scale.reshaped([&] {
    Shape s = p.perm_shape;
    s.back() = p.gc;
    return s;
  }()),
                    p.scale_shape);
  if (res) {
    r.residual = restore(res, x.shape());
    Shape s = p.perm_shape;
    s.back() = p.gc;
    r.residual_scale = restore(rscale.reshaped(s), p.scale_shape);
  }
  return r;
}

Tensor upcast(const CastResult& a) {
  detail::CastPlan p = block_plan(a.shape, a.options);
  const BlockParams bp = block_params(a.dtype, a.options, p.numel());
  auto perm_of = [&](const Tensor& t) { return detail::permuted(t, p); };
  auto need = [&](const Tensor& t, const char* what, int64_t n) {
    if (!t) throw Error("cast result of " + a.dtype.str() + " has no " + what + " tensor");
    if (dtype_size(t.dtype()) != 1 || t.numel() != n)
      throw Error("cast result of " + a.dtype.str() + ": " + what + " tensor has shape " +
                  shape_str(t.shape()) + " of " + dtype_name(t.dtype()) + ", expected " +
                  std::to_string(n) + " bytes");
  };
  need(a.codes, "codes", p.numel());
  need(a.scale, "scale", p.groups());
  if (bp.variant != Variant::T8) {
    need(a.residual, "residual", p.numel());
    need(a.residual_scale, "residual_scale", p.groups());
  }
  Tensor codes = perm_of(a.codes), scale = perm_of(a.scale), res = perm_of(a.residual),
         rscale = perm_of(a.residual_scale);
  Tensor values = Tensor::empty(DType::F32, p.perm_shape);
  float* out = values.mutable_ptr<float>();
  detail::parallel_for(p.numel(), 1 << 15, a.options.threads, nullptr, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t g = (i / p.C) * p.gc + (i % p.C) / kBlock;
      const uint32_t sc = scale.ptr<uint8_t>()[g];
      const uint32_t rsc = rscale ? rscale.ptr<uint8_t>()[g] : 0u;
      const bool nan = sc == 0xFF;
      const uint32_t rc = res ? detail::load_code(res.data(), res.dtype(), i, bp.residual) : 0u;
      out[i] = detail::tcfp::element_value(bp, nan, codes.ptr<uint8_t>()[i], sc, rc, rsc);
    }
  });
  if (!p.permuted) return values.reshaped(a.shape);
  Tensor o = Tensor::empty(DType::F32, a.shape);
  detail::unpermute(values.data(), o.mutable_data(), 4, a.shape, p.perm);
  return o;
}

// Packed TCFP: the int4 residual of TCFP-12 goes two per byte along the last axis (element 2i in
// the low nibble); everything else is already byte-sized.
CastResult pack(const CastResult& a) {
  CastResult r = a;
  r.mode = CastMode::Compress;
  if (family_traits(a.dtype.family()).packed_residual_bits == 4) {
    const Shape& s = a.residual.shape();
    const int64_t last = s.back(), rows = a.residual.numel() / last;
    Shape o = s;
    o.back() = (last + 1) / 2;
    Tensor t = Tensor::empty(DType::U8, o);
    for (int64_t rr = 0; rr < rows; ++rr)
      for (int64_t k = 0; k < last; ++k)
        t.mutable_ptr<uint8_t>()[rr * o.back() + k / 2] |=
            static_cast<uint8_t>((a.residual.ptr<uint8_t>()[rr * last + k] & 0xF) << ((k % 2) * 4));
    r.residual = t;
  }
  return r;
}

CastResult unpack(const CastResult& c) {
  CastResult r = c;
  r.mode = CastMode::Actual;
  if (family_traits(c.dtype.family()).packed_residual_bits == 4) {
    if (!c.codes || !c.residual)
      throw Error("compressed TCFP-12 result needs its codes and residual tensors");
    const Shape& s = c.codes.shape();
    const int64_t last = s.empty() ? 1 : s.back(), rows = c.codes.numel() / last;
    const int64_t pl = (last + 1) / 2;
    if (c.residual.numel() != rows * pl) throw Error("packed TCFP-12 residual has the wrong size");
    Tensor t = Tensor::empty(DType::I8, s);
    for (int64_t rr = 0; rr < rows; ++rr)
      for (int64_t k = 0; k < last; ++k) {
        uint8_t v = (c.residual.ptr<uint8_t>()[rr * pl + k / 2] >> ((k % 2) * 4)) & 0xF;
        if (v & 0x8) v |= 0xF0;
        t.mutable_ptr<uint8_t>()[rr * last + k] = v;
      }
    r.residual = t;
  }
  return r;
}

Tensor ErrorFeedback::step(const std::string& name, const Tensor& x, const DataType& dtype,
                           const CastOptions& opt) {
  Tensor xf = x.dtype() == DType::F32 ? x.clone() : x.to_f32();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = error_.find(name);
    if (it != error_.end()) {
      if (it->second.shape() != xf.shape())
        throw Error("error feedback for '" + name + "': shape " + shape_str(xf.shape()) +
                    " differs from the stored " + shape_str(it->second.shape()));
      float* p = xf.mutable_ptr<float>();
      const float* e = it->second.ptr<float>();
      for (int64_t i = 0; i < xf.numel(); ++i) p[i] += e[i];
    }
  }
  CastOptions o = opt;
  o.mode = CastMode::Virtual;
  CastResult r = castscope::cast(xf, dtype, o);
  Tensor err = Tensor::empty(DType::F32, xf.shape());
  for (int64_t i = 0; i < xf.numel(); ++i) {
    const float d = xf.ptr<float>()[i] - r.values.ptr<float>()[i];
    err.mutable_ptr<float>()[i] = std::isfinite(d) ? d : 0.0f;
  }
  std::lock_guard<std::mutex> lock(mu_);
  error_[name] = err;
  return r.values;
}

void ErrorFeedback::reset(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  error_.erase(name);
}
void ErrorFeedback::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  error_.clear();
}
bool ErrorFeedback::has(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_.count(name) != 0;
}

}  // namespace castscope::tcfp
