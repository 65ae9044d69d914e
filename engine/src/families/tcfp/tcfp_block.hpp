// One TCFP block (32 values along the tile axis), for the CPU engine and the CUDA kernels alike.
// Every block is processed sequentially in index order so that sums (the NormalFloat sigma)
// round identically on every backend.
#pragma once

#include "core/group.hpp"

namespace castscope::detail::tcfp {

constexpr int kBlock = 32;

enum class Variant : uint8_t { T8, T12, T16 };

struct BlockParams {
  Variant variant = Variant::T8;
  Format fp8;       // e4m3fn
  Format e8m0;      // block scale format
  Format residual;  // TCFP-12: int4 as integers in [-7, 7]; TCFP-16: e4m3fn
  bool nf_aware = true;
  scalar::Round round = scalar::Round::Even;
  uint64_t seed = 0;
  int64_t numel = 0;  // stochastic streams: main term uses the element index, residual index+numel
};

// Exponent scale code of a block whose chosen magnitude is `a`: the smallest power of two that
// puts a at or under the format's max (no clipping of a), clamped to e8m0's codes.
CS_HD uint32_t block_scale_code(double a, const Format& data, const Format& e8m0) {
  if (!(a > 0)) return 0;
  int e = scalar::select_exponent(a, data, scalar::ScaleMode::TopBinade);
  if (data.kind != scalar::Kind::Float) {
    // Integers: select_exponent floors; move up when a does not fit under max at that exponent.
    int binade;
    uint64_t m;
    scalar::unpack(a, binade, m);
    e = binade;
    if (scalar::ldexp_int(m, -52) > scalar::ldexp_int(data.maxr, data.maxe)) ++e;
  }
  int code = e - data.emax + e8m0.bias;
  const int maxcode = (1 << e8m0.bits) - 2;
  return static_cast<uint32_t>(code < 0 ? 0 : (code > maxcode ? maxcode : code));
}

CS_HD int shift_of(uint32_t code, const Format& e8m0) {
  return static_cast<int>(code) - e8m0.bias;
}

// Magnitude the main scale is chosen for: 3 sigma of the block (NormalFloat-aware), never more
// than absmax; absmax for constant blocks or when nf_aware is off. x(i) gives the block's values,
// summed in index order (the CUDA kernel reads them from other lanes of a warp).
template <class Get>
CS_HD double main_target_of(const Get& x, int n, double absmax, bool nf_aware) {
  if (!nf_aware || n < 2) return absmax;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += x(i);
  const double mean = sum / n;
  double ss = 0;
  for (int i = 0; i < n; ++i) {
    const double d = x(i) - mean;
#if defined(__CUDA_ARCH__)
    ss = __dadd_rn(ss, __dmul_rn(d, d));  // no FMA: the CPU rounds the product first
#else
    ss += d * d;
#endif
  }
  const double sigma = sqrt(ss / n);
  if (!(sigma > 0)) return absmax;
  const double t = 3.0 * sigma;
  return t < absmax ? t : absmax;
}
CS_HD double main_target(const double* x, int n, double absmax, bool nf_aware) {
  return main_target_of([x](int i) { return x[i]; }, n, absmax, nf_aware);
}

struct BlockCodes {
  uint32_t scale = 0, rscale = 0;
  bool nan = false;
};

CS_HD Quantized quantize_term(double v, int shift, const Format& f, const BlockParams& bp,
                              uint64_t index) {
  const uint32_t rnd =
      bp.round == scalar::Round::Stochastic ? scalar::random_bits(bp.seed, index) : 0u;
  Quantized q =
      scalar::quantize(v * scalar::pow2(-shift), f, bp.round, scalar::Overflow::Saturate, rnd);
  return canonical(q, f);
}

CS_HD double term_value(const Quantized& q, int shift) {
  return scalar::value_of(q, shift);
}

// Decoded value of one element from its term codes.
CS_HD float element_value(const BlockParams& bp, bool nan, uint32_t main_code, uint32_t scale_code,
                          uint32_t res_code, uint32_t rscale_code) {
  if (nan) return scalar::to_f32(nan_double());
  double v = term_value(scalar::decode(main_code, bp.fp8), shift_of(scale_code, bp.e8m0));
  if (bp.variant != Variant::T8)
    v += term_value(scalar::decode(res_code, bp.residual), shift_of(rscale_code, bp.e8m0));
  return scalar::to_f32(v);
}

// Cast one block of n (<= 32) values; writes the per-element codes and returns the scales.
// A non-finite value makes the whole block NaN (scale codes 0xFF), as for MX tiles.
CS_HD BlockCodes cast_block(const BlockParams& bp, const double* x, int n, int64_t first_index,
                            uint32_t* main_codes, uint32_t* res_codes, float* values,
                            int64_t* clipped) {
  BlockCodes bc;
  double absmax = 0;
  bool nonfinite = false;
  for (int i = 0; i < n; ++i) {
    if (!(x[i] - x[i] == 0))
      nonfinite = true;
    else
      absmax = fabs(x[i]) > absmax ? fabs(x[i]) : absmax;
  }
  if (nonfinite) {
    bc.nan = true;
    bc.scale = bc.rscale = (1u << bp.e8m0.bits) - 1;
    for (int i = 0; i < n; ++i) {
      main_codes[i] = 0;
      res_codes[i] = 0;
      if (values) values[i] = scalar::to_f32(nan_double());
    }
    return bc;
  }
  const bool nf = bp.variant == Variant::T8 && bp.nf_aware;
  bc.scale = block_scale_code(main_target(x, n, absmax, nf), bp.fp8, bp.e8m0);
  const int s = shift_of(bc.scale, bp.e8m0);
  double resid[kBlock];
  double rmax = 0;
  for (int i = 0; i < n; ++i) {
    Quantized q = quantize_term(x[i], s, bp.fp8, bp, static_cast<uint64_t>(first_index + i));
    if (clipped && q.clipped) ++*clipped;
    main_codes[i] = scalar::encode(q, bp.fp8);
    resid[i] = x[i] - term_value(scalar::decode(main_codes[i], bp.fp8), s);
    rmax = fabs(resid[i]) > rmax ? fabs(resid[i]) : rmax;
  }
  if (bp.variant == Variant::T8) {
    for (int i = 0; i < n; ++i) {
      res_codes[i] = 0;
      if (values) values[i] = element_value(bp, false, main_codes[i], bc.scale, 0, 0);
    }
    return bc;
  }
  bc.rscale = block_scale_code(rmax, bp.residual, bp.e8m0);
  const int rs = shift_of(bc.rscale, bp.e8m0);
  for (int i = 0; i < n; ++i) {
    Quantized q = quantize_term(resid[i], rs, bp.residual, bp,
                                static_cast<uint64_t>(bp.numel + first_index + i));
    res_codes[i] = scalar::encode(q, bp.residual);
    if (values)
      values[i] = element_value(bp, false, main_codes[i], bc.scale, res_codes[i], bc.rscale);
  }
  return bc;
}

}  // namespace castscope::detail::tcfp
