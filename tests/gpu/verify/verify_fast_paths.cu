// Device checks of the cast kernels' fast paths (float thresholds, bfloat16 code functions, TCFP's
// float paths) against the shared scalar code over every input of a kind. Test code: built into
// the GPU tests only (tests/gpu/extra.cmake), never into the engine.
#include <cstdint>

#include "backends/cuda/cast_kernels.cuh"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"
#include "backends/cuda/mx_kernel.cuh"
#include "backends/cuda/tcfp_kernel.cuh"
#include "backends/cuda/tcfp_lean.cuh"
#include "verify/verify_kernels.hpp"

namespace castscope::gpu::detail {
namespace {

__device__ __forceinline__ uint32_t slow_code(double y, const scalar::Format& f, bool& clipped) {
  const scalar::Quantized q = castscope::detail::canonical(
      scalar::quantize(y, f, scalar::Round::Even, scalar::Overflow::Saturate, 0), f);
  clipped = q.clipped;
  return scalar::encode(q, f);
}

// NVFP4's float paths against the shared ones for a random double y: the thresholds for the
// element codes (x = RN(y * d), d = s * t with s an e4m3 value and t a float with a random number
// of significant bits, so exact midpoints occur), and the e4m3 scale choice for absmax RN(|y| *
// 6t).
__device__ bool nvfp4_paths_agree(double y, const scalar::Format& f, uint64_t seed, uint64_t i) {
  const uint32_t r1 = scalar::random_bits(seed ^ 0x27d4eb2fu, i),
                 r2 = scalar::random_bits(seed ^ 0x165667b1u, i);
  const float s = e4m3_value(1 + (r1 & 0x7F) % 126);  // 2^-9 .. 448
  uint32_t tb =
      (static_cast<uint32_t>(static_cast<int>((r2 >> 23) % 200) + 27) << 23) | (r2 & 0x7FFFFFu);
  if (r1 & 0x100) tb &= ~((1u << ((r1 >> 9) % 24)) - 1);
  const float t = __uint_as_float(tb);  // 2^-100 .. 2^100
  const double d = static_cast<double>(s) * t;
  bool ok = true;
  const float xf = static_cast<float>(y * d);
  if (xf - xf == 0.0f) {
    bool c1 = false, c2 = false;
    const uint32_t want = slow_code(static_cast<double>(xf) / d, f, c1);
    ok = code_e2m1fnuz_thr(xf, e2m1_thresholds(s, t), c2) == want && c1 == c2;
  }
  castscope::detail::KernelParams kp;
  kp.data = kp.data_codes = f;
  kp.scale = static_format(kE4M3FN);
  kp.scaled = kp.multiscale = true;
  kp.data_max = 6.0;
  kp.tensor_scale = t;
  const float am = fabsf(static_cast<float>(y * 6.0 * t));
  if (am - am == 0.0f) {
    const double inv_td = 1.0 / (kp.tensor_scale * kp.data_max);
    const castscope::detail::GroupScale want =
        castscope::detail::choose_scale(kp, am, 0.0, 0.0, false);
    const castscope::detail::GroupScale got =
        choose_e4m3_scale_f32(kp, am, false, static_cast<float>(inv_td),
                              [&] { return choose_float_scale_fast(kp, am, false, inv_td); });
    ok = ok && got.scale_code == want.scale_code && got.s == want.s;
  }
  return ok;
}

__global__ void verify_kernel(scalar::Format f, int hw, uint64_t extra, uint64_t seed,
                              unsigned long long* bad, unsigned long long* first) {
  const uint64_t total = (1ull << 32) + extra;
  unsigned long long mism = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    double y;
    bool f32 = false;
    if (i < (1ull << 32)) {
      const float yf = __uint_as_float(static_cast<uint32_t>(i));
      if (!(yf - yf == 0.0f)) continue;
      y = yf;
      f32 = true;
    } else {
      // Random doubles within +-2^40 of the grid, with their low bits often zero (ties).
      const uint64_t r = (static_cast<uint64_t>(scalar::random_bits(seed, 2 * i)) << 32) |
                         scalar::random_bits(seed, 2 * i + 1);
      const int e = static_cast<int>((r >> 52) % 81) - 40;
      uint64_t mant = r & 0x000FFFFFFFFFFFFFull;
      if (r & 1) mant &= ~((1ull << ((r >> 1) % 52)) - 1);
      y = scalar::bits_double((r & (1ull << 63)) | (static_cast<uint64_t>(e + 1023) << 52) | mant);
    }
    bool c0 = false;
    const uint32_t want = slow_code(y, f, c0);
    const scalar::Quantized q64 = castscope::detail::canonical(quantize_rne_f64(y, f), f);
    bool ok = scalar::encode(q64, f) == want && q64.clipped == c0;
    if (!f32) {
      // The division-free path: x a float, d a small-significand scale (like e4m3 * fp32).
      const uint32_t r2 = scalar::random_bits(seed ^ 0x5bd1e995u, i);
      const double d = (8 + (r2 & 7)) * scalar::pow2(static_cast<int>((r2 >> 3) % 24) - 15);
      const float xf = static_cast<float>(y * d);
      if (xf - xf == 0.0f) {
        bool c1 = false;
        const uint32_t w2 = slow_code(static_cast<double>(xf) / d, f, c1);
        const scalar::Quantized qd =
            castscope::detail::canonical(quantize_rne_div(xf, d, 1.0 / d, f), f);
        ok = ok && scalar::encode(qd, f) == w2 && qd.clipped == c1;
        if (hw == kE2M1FNUZ) {
          bool c3 = false;
          ok = ok && code_e2m1fnuz_div(xf, d, static_cast<float>(1.0 / d), f, c3) == w2 && c3 == c1;
        }
      }
      if (hw == kE2M1FNUZ) ok = ok && nvfp4_paths_agree(y, f, seed, i);
    }
    if (f32 && hw) {
      bool c2 = false;
      const float yf = static_cast<float>(y);
      const uint32_t hc = hw == kE4M3FN     ? code_e4m3fn(yf, c2)
                          : hw == kE5M2     ? code_e5m2(yf, c2)
                          : hw == kE2M1FNUZ ? code_e2m1fnuz(yf, c2)
                          : hw == kE2M3FNUZ ? code_e2m3(yf, c2)
                          : hw == kE3M2FNUZ ? code_e3m2(yf, c2)
                                            : code_int8q6(yf, c2);
      ok = ok && hc == want && c2 == c0;
    }
    if (f32 && y > 0) {
      // The exponent-scale choice from float bits, for every scale mode.
      for (int m = 0; m < 5; ++m) {
        const auto mode = static_cast<scalar::ScaleMode>(m);
        ok = ok && select_exponent_f32(static_cast<float>(y), f, mode) ==
                       scalar::select_exponent(y, f, mode);
      }
    }
    if (f32) {
      const scalar::Quantized q32 =
          castscope::detail::canonical(quantize_rne_f32(static_cast<float>(y), f), f);
      ok = ok && scalar::encode(q32, f) == want && q32.clipped == c0;
    }
    if (!ok) {
      ++mism;
      atomicExch(first, static_cast<unsigned long long>(__double_as_longlong(y)));
    }
  }
  if (mism) atomicAdd(bad, mism);
}

__global__ void verify_bf16_kernel(unsigned long long* bad, unsigned long long* first,
                                   unsigned long long* checked) {
  const scalar::Format f = static_format(kBF16);
  unsigned long long mism = 0, seen = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float y = __uint_as_float(static_cast<uint32_t>(i));
    if (!(y - y == 0.0f)) continue;
    ++seen;
    bool ok = true;
    for (const scalar::Overflow ovf : {scalar::Overflow::Saturate, scalar::Overflow::IEEE}) {
      const scalar::Quantized q = castscope::detail::canonical(
          scalar::quantize(static_cast<double>(y), f, scalar::Round::Even, ovf, 0), f);
      bool cl = false;
      const uint32_t got = code_bf16(y, ovf == scalar::Overflow::Saturate, cl);
      ok = ok && got == scalar::encode(q, f) && cl == q.clipped;
    }
    if (!ok) {
      ++mism;
      atomicExch(first, static_cast<unsigned long long>(i));
    }
  }
  if (mism) atomicAdd(bad, mism);
  atomicAdd(checked, seen);
}

__global__ void verify_tcfp_kernel(scalar::Format data, scalar::Format e8m0,
                                   unsigned long long* bad, unsigned long long* first) {
  const bool fixed = int_fixed_grid(data);
  const float inv_q = pow2f(-data.qmin), maxr = static_cast<float>(data.maxr);
  unsigned long long mism = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < 0x7F800000u;
       i += gridDim.x * blockDim.x) {
    const float a = __uint_as_float(i);
    bool ok = block_scale_code_f32(a, data, e8m0) ==
              tcb::block_scale_code(static_cast<double>(a), data, e8m0);
    if (fixed)
      for (const float y : {a, -a}) {
        const scalar::Quantized q = castscope::detail::canonical(
            scalar::quantize(static_cast<double>(y), data, scalar::Round::Even,
                             scalar::Overflow::Saturate, 0),
            data);
        uint8_t want = 0;  // the byte the TCFP kernels' residual output holds
        store_code(&want, 1, 0, scalar::encode(q, data), data);
        ok = ok && int_fixed_byte(y, inv_q, maxr) == want;
      }
    if (!ok) {
      ++mism;
      atomicExch(first, static_cast<unsigned long long>(i));
    }
  }
  if (mism) atomicAdd(bad, mism);
}

}  // namespace

uint64_t verify_tcfp_fast_paths(const scalar::Format& data, uint32_t* first_bad) {
  if (data.kind == scalar::Kind::Int && !int_fixed_grid(data))
    throw Error("verify_tcfp_fast_paths: an integer grid with more than one quantum");
  DeviceTensor out = DeviceTensor::empty(DType::U64, {2}, true);
  unsigned long long* p = static_cast<unsigned long long*>(out.mutable_data());
  verify_tcfp_kernel<<<static_cast<unsigned>(sm_count()) * 8, 256, 0, stream()>>>(
      data, NumberSpec::parse("e8m0").format(), p, p + 1);
  CS_CUDA_LAUNCH("verify_tcfp_kernel");
  Tensor h = out.download();
  if (first_bad) *first_bad = static_cast<uint32_t>(h.ptr<uint64_t>()[1]);
  return h.ptr<uint64_t>()[0];
}

uint64_t verify_bf16_codes(uint32_t* first_bad, uint64_t* checked) {
  DeviceTensor out = DeviceTensor::empty(DType::U64, {3}, true);
  unsigned long long* p = static_cast<unsigned long long*>(out.mutable_data());
  verify_bf16_kernel<<<static_cast<unsigned>(sm_count()) * 8, 256, 0, stream()>>>(p, p + 1, p + 2);
  CS_CUDA_LAUNCH("verify_bf16_kernel");
  Tensor h = out.download();
  if (first_bad) *first_bad = static_cast<uint32_t>(h.ptr<uint64_t>()[1]);
  if (checked) *checked = h.ptr<uint64_t>()[2];
  return h.ptr<uint64_t>()[0];
}

uint64_t verify_fast_quantizer(const scalar::Format& f, uint64_t extra, uint64_t seed,
                               double* first_bad) {
  DeviceTensor out = DeviceTensor::empty(DType::U64, {2}, true);
  unsigned long long* p = static_cast<unsigned long long*>(out.mutable_data());
  const int id = static_format_id(f);
  const int hw = id;  // every compile-time grid has a dedicated code function
  verify_kernel<<<static_cast<unsigned>(sm_count()) * 8, 256, 0, stream()>>>(f, hw, extra, seed, p,
                                                                             p + 1);
  CS_CUDA_LAUNCH("verify_kernel");
  Tensor h = out.download();
  if (first_bad) *first_bad = scalar::bits_double(h.ptr<uint64_t>()[1]);
  return h.ptr<uint64_t>()[0];
}

}  // namespace castscope::gpu::detail
