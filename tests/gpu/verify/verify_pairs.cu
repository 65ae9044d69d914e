// The device check of the two-at-a-time bfloat16 code paths (bf16_pairs.cuh) on every finite
// bfloat16 input: MX lines (e2m1, e2m3, int8) against the shared quantizer for every exponent
// scale they take, NVFP4's packed thresholds against the float threshold codes for every e4m3
// tile scale.
#include "backends/cuda/bf16_pairs.cuh"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"
#include "verify/verify_kernels.hpp"

namespace castscope::gpu::detail {
namespace {

constexpr int kShiftLo = -130, kShiftHi = 130;  // past both ends of what set() accepts
constexpr int kTensorScales = 14;

__device__ __forceinline__ uint16_t finite_or_zero(uint32_t h) {
  return (h & 0x7F80u) == 0x7F80u ? 0 : static_cast<uint16_t>(h);
}
// The codes of both halves of the word r, in bytes 0 and 1.
template <int F>
__device__ __forceinline__ uint32_t pair_codes(uint32_t mag, uint32_t r) {
  constexpr int kSignBit = static_format(F).ebits + static_format(F).mbits;
  return code_bytes<kSignBit>(mag, mag, r, r) & 0xFFFFu;
}
// x / 2^shift's code, as the shared quantizer gives it on grid F, for each half.
template <class Lines, int F>
__device__ bool lines_agree(uint32_t r, int shift, unsigned long long& seen) {
  Lines lines;
  if (!lines.set(shift)) return true;
  ++seen;
  const uint32_t mag = lines.magnitudes(r & 0x7FFF7FFFu);
  const uint32_t got = Lines::codes(mag, mag, r, r) & 0xFFFFu;
  const scalar::Format f = static_format(F);
  const double s = scalar::pow2(-shift);
  uint32_t want = 0;
  for (int h = 0; h < 2; ++h) {
    const float x = __uint_as_float((r >> (16 * h)) << 16);
    const scalar::Quantized q = castscope::detail::canonical(
        scalar::quantize(static_cast<double>(x) * s, f, scalar::Round::Even,
                         scalar::Overflow::Saturate, 0),
        f);
    want |= scalar::encode(q, f) << (8 * h);
  }
  return got == want;
}

// The tensor scales of the NVFP4 check: binades from float's subnormal edge to far above 1, each
// with a random significand.
__device__ float tensor_scale(int k, uint64_t seed) {
  const int e[kTensorScales] = {-128, -126, -124, -120, -100, -60, -20, -12, -3, 0, 5, 20, 60, 100};
  const uint32_t m = scalar::random_bits(seed, static_cast<uint64_t>(k)) & 0x7FFFFFu;
  if (e[k] < -126) return __uint_as_float(((m | 0x800000u) >> (-126 - e[k])));
  return __uint_as_float((static_cast<uint32_t>(e[k] + 127) << 23) | m);
}

__global__ void verify_pairs_kernel(uint64_t seed, unsigned long long* bad,
                                    unsigned long long* first, unsigned long long* checked) {
  unsigned long long mism = 0, seen = 0;
  constexpr uint64_t kShifts = kShiftHi - kShiftLo + 1;
  constexpr uint64_t kLinesWork = 65536 * kShifts;
  constexpr uint64_t kThrWork = 65536ull * 126 * kTensorScales;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       i < kLinesWork + kThrWork; i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint32_t lo = finite_or_zero(static_cast<uint32_t>(i & 0xFFFFu));
    // The other half: a different pattern, so that the halves do not always agree.
    const uint32_t hi = finite_or_zero(static_cast<uint32_t>((i * 0x9E37u + 0x5A5Bu) & 0xFFFFu));
    const uint32_t r = lo | (hi << 16);
    bool ok = true;
    if (i < kLinesWork) {
      const int shift = kShiftLo + static_cast<int>(i >> 16);
      ok = lines_agree<OcpLinesX2<kE2M1FNUZ>, kE2M1FNUZ>(r, shift, seen) &&
           lines_agree<OcpLinesX2<kE2M3FNUZ>, kE2M3FNUZ>(r, shift, seen) &&
           lines_agree<Int8LinesX2, kInt8Fixed>(r, shift, seen);
    } else {
      const uint64_t j = (i - kLinesWork) >> 16;
      const uint32_t s_code = 1 + static_cast<uint32_t>(j % 126);
      const float t = tensor_scale(static_cast<int>(j / 126), seed);
      const E2m1Thresholds thr = e2m1_thresholds(e4m3_value(s_code), t);
      const uint32_t got =
          pair_codes<kE2M1FNUZ>(e2m1_magnitudes_thr(r & 0x7FFF7FFFu, bf16_pairs(thr)), r);
      uint32_t want = 0;
      for (int h = 0; h < 2; ++h) {
        bool cl = false;
        want |= code_e2m1fnuz_thr(__uint_as_float((r >> (16 * h)) << 16), thr, cl) << (8 * h);
      }
      ok = got == want;
      ++seen;
    }
    if (!ok) {
      ++mism;
      atomicExch(first, static_cast<unsigned long long>(i));
    }
  }
  if (mism) atomicAdd(bad, mism);
  atomicAdd(checked, seen);
}

}  // namespace

uint64_t verify_bf16_pair_codes(uint64_t seed, uint64_t* first_bad, uint64_t* checked) {
  DeviceTensor out = DeviceTensor::empty(DType::U64, {3}, true);
  unsigned long long* p = static_cast<unsigned long long*>(out.mutable_data());
  verify_pairs_kernel<<<static_cast<unsigned>(sm_count()) * 8, 256, 0, stream()>>>(seed, p, p + 1,
                                                                                   p + 2);
  CS_CUDA_LAUNCH("verify_pairs_kernel");
  Tensor h = out.download();
  if (first_bad) *first_bad = h.ptr<uint64_t>()[1];
  if (checked) *checked = h.ptr<uint64_t>()[2];
  return h.ptr<uint64_t>()[0];
}

}  // namespace castscope::gpu::detail
