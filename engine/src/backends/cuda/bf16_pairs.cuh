// Codes of bfloat16 input two values at a time. A 32-bit word of the input holds two bfloat16,
// and Hopper's packed bfloat16 instructions (fma.rn.bf16x2, min.bf16x2, set.gt.bf16x2) work on
// both halves at once, where the float code functions unpack every value and spend a dozen
// instructions on it. The lean kernel is issue-bound from bfloat16 for MXFP4, NVFP4 and int8 under
// an exponent scale, so the instructions per value are what holds those casts below the memory
// bound.
//
// Every code path here ends in a bfloat16 128 + m per half, m the code's magnitude: 128 = 2^7 is
// where bfloat16's spacing is 1, its bits are 0x4300 + m for m < 128, so bytes 0 and 2 of the
// word are the two magnitudes. code_bytes (sign and magnitude) or Int8LinesX2::codes (two's
// complement) adds the signs and puts codes in element order.
// GpuCast.Bfloat16PairCodesEqualFloatCodesExhaustively checks both paths against the float code
// functions on every finite bfloat16, in either half of a word.
#pragma once

#include "backends/cuda/fast_quant.cuh"

namespace castscope::gpu::detail {

constexpr uint32_t kMagic16 = 0x4300u;  // bfloat16 128

__device__ __forceinline__ constexpr uint32_t both_halves(uint32_t h) {
  return h | (h << 16);
}
__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t min_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// acc + (a > t ? 1 : 0) in each half.
__device__ __forceinline__ uint32_t add_gt_bf16x2(uint32_t acc, uint32_t a, uint32_t t) {
  uint32_t d;
  asm("{\n\t.reg .b32 s;\n\tset.gt.bf16x2.bf16x2 s, %1, %2;\n\tadd.rn.bf16x2 %0, %3, s;\n\t}"
      : "=r"(d)
      : "r"(a), "r"(t), "r"(acc));
  return d;
}
// The byte permute with prmt's sign mode (selector nibbles with bit 3 set replicate the selected
// byte's top bit), which __byte_perm does not promise.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Four values' codes, one per byte in element order, from the magnitudes of two words (bytes 0
// and 2 of m0, m1) and the two input words (r0, r1) whose signs go to bit SB of each code.
template <int SB>
__device__ __forceinline__ uint32_t code_bytes(uint32_t m0, uint32_t m1, uint32_t r0, uint32_t r1) {
  const uint32_t mag = prmt(m0, m1, 0x6420u);
  const uint32_t sign = prmt(r0, r1, 0xFDB9u);  // each byte 0xFF where its value is negative
  return mag | (sign & (0x01010101u << SB));
}
// Eight 4-bit codes, one per byte in b0 (values 0-3) and b1 (4-7), as eight nibbles.
__device__ __forceinline__ uint32_t code_nibbles(uint32_t b0, uint32_t b1) {
  return prmt(b0 | (b0 >> 4), b1 | (b1 >> 4), 0x6420u);
}

// code_small_ocp's lines for bfloat16 pairs under an exponent scale: range r's line is
// |x| * 2^(M - EMIN - r - shift) + 128 + r * 2^M, which fma.rn.bf16x2 rounds once to the
// integer 128 + code (the line stays inside [128, 256), spacing 1, while x is in range r; 128 +
// r * 2^M is even, so ties go to the even code as in code_small_ocp), and the code is the least
// line and the top code. The scaling by 2^-shift folds into the multipliers, which must be
// normal bfloat16: set() says whether they are (false only at the ends of the scale's range).
template <int F>
struct OcpLinesX2 {
  static constexpr scalar::Format kF = static_format(F);
  static constexpr int kRanges = kF.emax - kF.emin + 1;
  static constexpr uint32_t kMaxCode =
      (static_cast<uint32_t>(kRanges) << kF.mbits) | ((1u << kF.mbits) - 1u);
  static_assert(kF.kind == scalar::Kind::Float && kRanges <= 3 &&
                    ((kRanges + 1) << kF.mbits) <= 128,
                "the lines leave [128, 256) or are too many");
  uint32_t mul[kRanges];
  __device__ __forceinline__ bool set(int shift) {
    const int e0 = kF.mbits - kF.emin - shift;
#pragma unroll
    for (int r = 0; r < kRanges; ++r)
      mul[r] = both_halves(static_cast<uint32_t>(e0 - r + 127) << 7);
    return e0 <= 127 && e0 - (kRanges - 1) >= -126;
  }
  // 128 + the magnitude code of each half of abs2 (two bfloat16 magnitudes).
  __device__ __forceinline__ uint32_t magnitudes(uint32_t abs2) const {
    uint32_t c = both_halves(kMagic16 + kMaxCode);
#pragma unroll
    for (int r = 0; r < kRanges; ++r)
      c = min_bf16x2(c, fma_bf16x2(abs2, mul[r],
                                   both_halves(kMagic16 + (static_cast<uint32_t>(r) << kF.mbits))));
    return c;
  }
  __device__ __forceinline__ static uint32_t codes(uint32_t m0, uint32_t m1, uint32_t r0,
                                                   uint32_t r1) {
    return code_bytes<kF.ebits + kF.mbits>(m0, m1, r0, r1);
  }
};

// MX's int8 (code_int8q6: RNE(64 x / 2^shift), saturating at +-127) for bfloat16 pairs under an
// exponent scale: one line, |x| * 2^(6 - shift) + 128, rounded once by fma.rn.bf16x2 to 128 +
// RNE(64 |x| / 2^shift) (128 is even, so ties go to the even magnitude), then clamped to 255.
// set() as OcpLinesX2's: the multiplier must be a normal bfloat16.
struct Int8LinesX2 {
  uint32_t mul;
  __device__ __forceinline__ bool set(int shift) {
    const int e = 6 - shift;
    mul = both_halves(static_cast<uint32_t>(e + 127) << 7);
    return e <= 127 && e >= -126;
  }
  __device__ __forceinline__ uint32_t magnitudes(uint32_t abs2) const {
    return min_bf16x2(fma_bf16x2(abs2, mul, both_halves(kMagic16)), both_halves(kMagic16 + 127u));
  }
  // Four codes, two's complement bytes in element order, from the magnitudes of two words and
  // the two input words. 0x4400 - (0x4300 + m) = 256 - m, whose low byte is -m's (0 for m = 0).
  __device__ __forceinline__ static uint32_t codes(uint32_t m0, uint32_t m1, uint32_t r0,
                                                   uint32_t r1) {
    constexpr uint32_t k256 = both_halves(kMagic16 + 0x100u);
    const uint32_t mag = prmt(m0, m1, 0x6420u), neg = prmt(k256 - m0, k256 - m1, 0x6420u);
    const uint32_t sign = prmt(r0, r1, 0xFDB9u);
    return (mag & ~sign) | (neg & sign);
  }
};

// NVFP4's e2m1 thresholds (E2m1Thresholds, float) as bfloat16 pairs, every test turned into
// "a > t": for a bfloat16 a and a real T, a > T exactly when a > RD_bf16(T), and a >= T exactly
// when a > the bfloat16 below RU_bf16(T). The float thresholds are already rounded toward the
// right side, and rounding again to bfloat16 in the same direction keeps that (bfloat16 values
// are float values). Every threshold is positive: the tile scale and tensor scale are.
// The clip test (t[7]) is not among them: the lean kernel takes it on each lane's largest value.
struct E2m1ThresholdsX2 {
  uint32_t t[7];
};
__device__ __forceinline__ E2m1ThresholdsX2 bf16_pairs(const E2m1Thresholds& h) {
  E2m1ThresholdsX2 p;
#pragma unroll
  for (int i = 0; i < 7; ++i) {
    const uint32_t b = __float_as_uint(h.t[i]);
    // RD: truncation; RU: truncation after adding all but one unit of the dropped half.
    p.t[i] = prmt(i % 2 == 0 ? b : b + 0xFFFFu, 0, 0x3232u) - (i % 2 == 0 ? 0u : 0x00010001u);
  }
  return p;
}
// The magnitude code is the number of thresholds below a, counted on 128 (the lines' form). A
// binary search (three comparisons, selects of the next threshold) took fewer instructions but
// was slower: its comparisons wait on each other.
__device__ __forceinline__ uint32_t e2m1_magnitudes_thr(uint32_t abs2, const E2m1ThresholdsX2& h) {
  uint32_t acc = both_halves(kMagic16);
#pragma unroll
  for (int i = 0; i < 7; ++i) acc = add_gt_bf16x2(acc, abs2, h.t[i]);
  return acc;
}

}  // namespace castscope::gpu::detail
