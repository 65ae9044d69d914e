// The single bit-level encoder/decoder of CastScope. The CPU engine and the CUDA kernels both
// include this header, so a value is rounded, encoded and decoded by exactly the same arithmetic
// on every backend; that is what makes CPU/GPU bit-exactness a property of the build rather than
// of careful duplication. Everything here is plain integer and IEEE-double arithmetic with no
// library calls, so host and device compilers produce identical results.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CS_HD __host__ __device__ __forceinline__
#else
#define CS_HD inline
#endif

namespace castscope::scalar {

enum class Kind : uint8_t { Float, Int, UInt, Exponent };
// Finite: no Inf and no NaN encodings at all (OCP FP6/FP4 element types written e2m1, e3m2, e2m3).
enum class InfNan : uint8_t { IEEE, FN, FNUZ, Finite };
enum class Round : uint8_t { Even, Away, Zero, Stochastic };
enum class Overflow : uint8_t { Saturate, IEEE };

// Bit-level facts of a number format. Built once by NumberSpec (format.hpp) from the parameters;
// plain data so that it can be copied into kernel arguments.
struct Format {
  Kind kind = Kind::Float;
  InfNan infnan = InfNan::IEEE;
  int bits = 0;   // storage bits including sign
  int ebits = 0;  // exponent field width (0 for integers)
  int mbits = 0;  // explicit mantissa bits (for integers: magnitude bits)
  int bias = 0;
  int emax = 0;  // unbiased exponent of the top finite binade (0 for fixed-point integers)
  int emin = 0;  // unbiased exponent of the smallest normal binade
  // Quantization grid: value = r * 2^qe with r an integer. Floats: qe = max(binade - mgrid, qmin).
  // Integers: mgrid is large so that qe is always qmin (a fixed quantum).
  int mgrid = 0;
  int qmin = 0;
  // Largest finite magnitude = maxr * 2^maxe.
  uint64_t maxr = 0;
  int maxe = 0;
  int maxbinade = 0;  // floor(log2(max finite))
  bool has_inf = false;
  bool has_nan = false;
  bool has_negzero = false;  // -0 is a distinct code that means -0
  bool is_signed = true;
};

// The rules that derive every fact of a format from its parameters. NumberSpec builds its formats
// with them and the CUDA kernels their compile-time copies of the hot grids, so a fact changed here
// changes both.
//
// eXmY with a bias and an Inf / NaN policy. TensorCast spells the OCP FP6 / FP4 element types
// (and its other formats of at most 6 bits) fnuz; they have a -0 code and no NaN (spec decision 9).
CS_HD constexpr Format float_format(int ebits, int mbits, int bias, InfNan infnan) {
  if (infnan == InfNan::FNUZ && 1 + ebits + mbits <= 6) infnan = InfNan::Finite;
  Format f;
  f.kind = Kind::Float;
  f.infnan = infnan;
  f.ebits = ebits;
  f.mbits = mbits;
  f.bits = 1 + ebits + mbits;
  f.bias = bias;
  const int eall = (1 << ebits) - 1;
  f.emin = 1 - bias;
  f.mgrid = mbits;
  f.qmin = f.emin - mbits;
  f.emax = infnan == InfNan::IEEE ? eall - 1 - bias : eall - bias;
  f.maxr = infnan == InfNan::FN ? (uint64_t{2} << mbits) - 2 : (uint64_t{2} << mbits) - 1;
  f.has_inf = infnan == InfNan::IEEE;
  f.has_nan = infnan != InfNan::Finite;
  f.has_negzero = infnan != InfNan::FNUZ;
  f.maxe = f.emax - mbits;
  f.maxbinade = f.emax;
  return f;
}
// intK: fixed point with one integer bit (spec decision 7), q * 2^-(K-2) with q symmetric;
// uintK: plain unsigned integers.
CS_HD constexpr Format int_format(int bits, bool is_signed) {
  Format f;
  f.kind = is_signed ? Kind::Int : Kind::UInt;
  f.bits = bits;
  f.is_signed = is_signed;
  f.mgrid = 62;  // larger than any binade offset: the quantum is always qmin
  if (is_signed) {
    f.ebits = 1;
    f.mbits = bits - 2;
    f.maxr = (uint64_t{1} << (bits - 1)) - 1;
    f.qmin = f.maxe = -(bits - 2);
    f.emax = 0;
    f.emin = f.qmin;
    f.maxbinade = 0;
  } else {
    f.mbits = bits;
    f.maxr = (bits >= 64) ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    f.qmin = f.maxe = 0;
    f.emax = bits - 1;
    f.maxbinade = bits - 1;
  }
  return f;
}
// eXm0: a power of two (scale formats such as e8m0), the top code NaN.
CS_HD constexpr Format exponent_format(int ebits) {
  Format f;
  f.kind = Kind::Exponent;
  f.infnan = InfNan::IEEE;
  f.ebits = ebits;
  f.bits = ebits;
  f.bias = (1 << (ebits - 1)) - 1;
  f.emin = -f.bias;
  f.emax = (1 << ebits) - 2 - f.bias;
  f.qmin = f.emin;
  f.mgrid = 0;
  f.maxr = 1;
  f.maxe = f.emax;
  f.maxbinade = f.emax;
  f.has_nan = true;
  f.is_signed = false;
  return f;
}

// A rounded magnitude: value = (neg ? -1 : 1) * r * 2^qe. Flags say what happened on the way.
struct Quantized {
  uint64_t r = 0;
  int qe = 0;
  bool neg = false;
  bool nan = false;
  bool inf = false;
  bool clipped = false;  // a finite input was saturated (or clamped at 0 for uint)
};

// One expression on the device and another on the host: the device's intrinsic and the host's
// plain operation or bit cast, which give the same result.
#if defined(__CUDA_ARCH__)
#define CS_DEVICE_OR_HOST(device, host) (device)
#else
#define CS_DEVICE_OR_HOST(device, host) (host)
#endif

// Correctly rounded single operations that no compiler may fuse into an FMA or reorder: where
// a result's bits must match between the CPU and the GPU, sums and products go through these.
CS_HD double add_rn(double a, double b) {
  return CS_DEVICE_OR_HOST(__dadd_rn(a, b), a + b);
}
CS_HD double mul_rn(double a, double b) {
  return CS_DEVICE_OR_HOST(__dmul_rn(a, b), a * b);
}
CS_HD float add_rn(float a, float b) {
  return CS_DEVICE_OR_HOST(__fadd_rn(a, b), a + b);
}
CS_HD float sub_rn(float a, float b) {
  return CS_DEVICE_OR_HOST(__fsub_rn(a, b), a - b);
}
CS_HD float mul_rn(float a, float b) {
  return CS_DEVICE_OR_HOST(__fmul_rn(a, b), a * b);
}

// The bits of a float or double and back.
CS_HD uint64_t double_bits(double v) {
  return CS_DEVICE_OR_HOST(static_cast<uint64_t>(__double_as_longlong(v)),
                           __builtin_bit_cast(uint64_t, v));
}
CS_HD double bits_double(uint64_t u) {
  return CS_DEVICE_OR_HOST(__longlong_as_double(static_cast<long long>(u)),
                           __builtin_bit_cast(double, u));
}
CS_HD uint32_t float_bits(float v) {
  return CS_DEVICE_OR_HOST(static_cast<uint32_t>(__float_as_uint(v)),
                           __builtin_bit_cast(uint32_t, v));
}
CS_HD float bits_float(uint32_t u) {
  return CS_DEVICE_OR_HOST(__uint_as_float(u), __builtin_bit_cast(float, u));
}

// 2^e as a double, for e in the normal double range; exact and branch-light.
CS_HD double pow2(int e) {
  return bits_double(static_cast<uint64_t>(e + 1023) << 52);
}

// r * 2^e exactly (r < 2^53 and the result within double range), as (double)r times a power of two.
CS_HD double ldexp_int(uint64_t r, int e) {
  // Split the exponent so that neither factor leaves the normal range for |e| up to ~2000.
  int e1 = e / 2;
  return static_cast<double>(r) * pow2(e1) * pow2(e - e1);
}

// Rounding to float32 is the only rounding step of every decode; (float) of a double is
// round-to-nearest-even on the host and __double2float_rn on the device.
CS_HD float to_f32(double v) {
  return CS_DEVICE_OR_HOST(__double2float_rn(v), static_cast<float>(v));
}

// Counter-based generator for stochastic rounding: a stateless mix of (seed, index), so any
// element's random bits depend only on the seed and its position, never on threading or tiling.
CS_HD uint32_t random_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z ^= z >> 33;
  z *= 0xFF51AFD7ED558CCDull;
  z ^= z >> 33;
  z *= 0xC4CEB9FE1A85EC53ull;
  z ^= z >> 33;
  return static_cast<uint32_t>(z >> 32);
}

// Unbiased binade (floor(log2|v|)) and 53-bit significand of a finite non-zero double.
CS_HD void unpack(double v, int& binade, uint64_t& m) {
  uint64_t u = double_bits(v) & 0x7FFFFFFFFFFFFFFFull;
  int e = static_cast<int>(u >> 52);
  int adj = 0;
  if (e == 0) {  // subnormal double: scale into the normal range exactly
    u = double_bits(bits_double(u) * pow2(64)) & 0x7FFFFFFFFFFFFFFFull;
    e = static_cast<int>(u >> 52);
    adj = 64;
  }
  binade = e - 1023 - adj;
  m = (u & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull;
}

// Round the finite value v onto the grid of format f. Overflow is resolved per the policy:
// saturate clamps to +-max; ieee gives Inf where the format has one, NaN where it has one, and
// clamps otherwise (a format with neither has nothing else to give).
CS_HD Quantized quantize(double v, const Format& f, Round mode, Overflow ovf, uint32_t rnd) {
  Quantized q;
  q.neg = double_bits(v) >> 63;
  if (f.kind == Kind::Exponent) {
    // Exponent formats are unsigned powers of two without zero: cast the magnitude, and let
    // zero land on the smallest code.
    q.neg = false;
    if (v == 0.0) {
      q.r = 1;
      q.qe = f.qmin;
      return q;
    }
    if (v < 0) v = -v;
  }
  if (v == 0.0) {
    q.qe = f.qmin;
    return q;
  }
  // Below the bottom of an unsigned grid the result is 0; the magnitude is still rounded, to
  // count the value as clipped only when it would not have rounded to 0 anyway.
  const bool below_uint = f.kind == Kind::UInt && q.neg;
  int binade;
  uint64_t m;
  unpack(v, binade, m);
  // Anything two binades above the largest finite value overflows whatever the rounding.
  bool overflow = binade > f.maxbinade + 1;
  uint64_t r = 0;
  int qe = f.qmin;
  if (!overflow) {
    qe = binade - f.mgrid > f.qmin ? binade - f.mgrid : f.qmin;
    int sh = qe - (binade - 52);  // significand bits below the grid's quantum
    bool up = false;
    if (sh <= 0) {
      r = m << (-sh);
    } else {
      uint64_t rem;
      int cmp;  // remainder against half a quantum
      if (sh < 64) {
        r = m >> sh;
        rem = m & ((1ull << sh) - 1);
        uint64_t half = 1ull << (sh - 1);
        cmp = rem > half ? 1 : (rem == half ? 0 : -1);
      } else {
        r = 0;
        rem = m;
        cmp = -1;  // m < 2^53 <= half a quantum
      }
      switch (mode) {
        case Round::Even:
          up = cmp > 0 || (cmp == 0 && (r & 1));
          break;
        case Round::Away:
          up = cmp >= 0;
          break;
        case Round::Zero:
          up = cmp > 0;
          break;
        case Round::Stochastic: {
          uint32_t frac;
          if (sh <= 32)
            frac = static_cast<uint32_t>(rem << (32 - sh));
          else
            frac = sh - 32 < 64 ? static_cast<uint32_t>(rem >> (sh - 32)) : 0u;
          up = rnd < frac;
          break;
        }
      }
    }
    r += up ? 1 : 0;
    // Below the top binade a float's rounded value is at most 2^emax <= max, and an integer's
    // grid is fixed at maxe, so comparing on the top binade's quantum is exact.
    overflow = qe > f.maxe || (qe == f.maxe && r > f.maxr);
    if (f.kind == Kind::Exponent && r == 0) r = 1;  // no zero: the smallest power of two
  }
  if (below_uint) {
    q.neg = false;
    q.clipped = overflow || r != 0;
    q.qe = f.qmin;
    return q;
  }
  if (overflow) {
    if (ovf == Overflow::IEEE && f.has_inf) {
      q.inf = true;
    } else if (ovf == Overflow::IEEE && f.has_nan) {
      q.nan = true;
    } else {
      q.clipped = true;
      r = f.maxr;
      qe = f.maxe;
    }
  }
  q.r = r;
  q.qe = qe;
  return q;
}

// Value of a quantized magnitude times 2^shift, as a double (exact for every format here).
CS_HD double value_of(const Quantized& q, int shift) {
  if (q.nan) return bits_double(0x7FF8000000000000ull);
  if (q.inf)
    return q.neg ? -bits_double(0x7FF0000000000000ull) : bits_double(0x7FF0000000000000ull);
  double a = ldexp_int(q.r, q.qe + shift);
  return q.neg ? -a : a;
}

CS_HD uint32_t nan_code(const Format& f) {
  switch (f.infnan) {
    case InfNan::IEEE:
      return f.mbits > 0 ? (((1u << f.ebits) - 1) << f.mbits) | (1u << (f.mbits - 1))
                         : (1u << f.ebits) - 1;
    case InfNan::FN:
      return (1u << (f.bits - 1)) - 1;
    case InfNan::FNUZ:
      return 1u << (f.bits - 1);
    case InfNan::Finite:
      return 0;
  }
  return 0;
}

// Bits of a quantized value in format f (the low f.bits bits of the result).
CS_HD uint32_t encode(const Quantized& q, const Format& f) {
  const uint32_t mask = f.bits >= 32 ? 0xFFFFFFFFu : ((1u << f.bits) - 1);
  if (f.kind == Kind::Int) {
    int64_t s = q.neg ? -static_cast<int64_t>(q.r) : static_cast<int64_t>(q.r);
    return static_cast<uint32_t>(s) & mask;
  }
  if (f.kind == Kind::UInt) return static_cast<uint32_t>(q.r) & mask;
  if (q.nan) return nan_code(f);
  const uint32_t sign = q.neg ? 1u << (f.bits - 1) : 0u;
  if (f.kind == Kind::Exponent) {
    // Powers of two only: r is 1 or 2 (carry), qe the exponent. Zero has no code: smallest.
    if (q.r == 0) return 0;
    int e = q.qe + (q.r >= 2 ? 1 : 0) + f.bias;
    return static_cast<uint32_t>(e) & mask;
  }
  if (q.inf) return sign | (((1u << f.ebits) - 1) << f.mbits);
  if (q.r == 0) return f.has_negzero ? sign : 0u;
  uint64_t r = q.r;
  int qe = q.qe;
  if (r >> (f.mbits + 1)) {  // carried into the next binade
    r >>= 1;
    ++qe;
  }
  if (r < (1ull << f.mbits)) return sign | static_cast<uint32_t>(r);  // subnormal
  uint32_t e = static_cast<uint32_t>(qe + f.mbits + f.bias);
  return sign | (e << f.mbits) | static_cast<uint32_t>(r - (1ull << f.mbits));
}

// Inverse of encode: the quantized magnitude that a code stands for.
CS_HD Quantized decode(uint32_t code, const Format& f) {
  Quantized q;
  const uint32_t mask = f.bits >= 32 ? 0xFFFFFFFFu : ((1u << f.bits) - 1);
  code &= mask;
  q.qe = f.qmin;
  if (f.kind == Kind::Int) {
    int64_t s = code;
    if (f.bits < 64 && (code >> (f.bits - 1)) & 1u) s -= (int64_t{1} << f.bits);
    q.neg = s < 0;
    q.r = static_cast<uint64_t>(s < 0 ? -s : s);
    return q;
  }
  if (f.kind == Kind::UInt) {
    q.r = code;
    return q;
  }
  if (f.kind == Kind::Exponent) {
    if (code == mask) {
      q.nan = true;
      return q;
    }
    q.r = 1;
    q.qe = static_cast<int>(code) - f.bias;
    return q;
  }
  const uint32_t sign = 1u << (f.bits - 1);
  q.neg = (code & sign) != 0;
  const uint32_t mag = code & (sign - 1);
  const uint32_t e = mag >> f.mbits;
  const uint32_t mant = mag & ((1u << f.mbits) - 1);
  const uint32_t eall = (1u << f.ebits) - 1;
  switch (f.infnan) {
    case InfNan::IEEE:
      if (e == eall) {
        if (mant == 0)
          q.inf = true;
        else
          q.nan = true;
        return q;
      }
      break;
    case InfNan::FN:
      if (mag == sign - 1) {
        q.nan = true;
        return q;
      }
      break;
    case InfNan::FNUZ:
      if (code == sign) {
        q.nan = true;
        q.neg = false;
        return q;
      }
      break;
    case InfNan::Finite:
      break;
  }
  if (e == 0) {
    q.r = mant;
    q.qe = f.qmin;
  } else {
    q.r = mant | (1u << f.mbits);
    q.qe = static_cast<int>(e) - f.bias - f.mbits;
  }
  return q;
}

CS_HD double decode_value(uint32_t code, const Format& f) {
  return value_of(decode(code, f), 0);
}

// ---------------------------------------------------------------------------------------------
// Scale selection. absmax is the largest finite magnitude of a group, > 0.

enum class ScaleMode : uint8_t { Floor, Ceil, Midmax, Option3, TopBinade };

// TensorCast's midmax over 2^emax: halfway between max and the next value the grid would have
// above it, max + half a quantum of the top binade (spec decision 3). Where the top code is NaN
// (fn formats) that is not 2^(emax+1): e4m3fn gives 464, not 480.
CS_HD double midmax_scaled(const Format& f) {
  return ldexp_int(2 * f.maxr + 1, f.maxe - 1 - f.emax);
}

// Shared exponent (unbiased) of a group whose largest magnitude is a, for data format f.
CS_HD int select_exponent(double a, const Format& f, ScaleMode mode) {
  int binade;
  uint64_t m;
  unpack(a, binade, m);
  if (f.kind != Kind::Float || f.ebits <= 1 || mode == ScaleMode::Floor) return binade;
  // a / 2^binade in [1, 2) is m / 2^52; the thresholds are likewise exact binary fractions, so
  // every comparison below is exact.
  const double scaled = ldexp_int(m, -52);
  switch (mode) {
    case ScaleMode::Ceil:
      return binade + ((m & 0x000FFFFFFFFFFFFFull) ? 1 : 0);
    case ScaleMode::Midmax:
      return binade + (scaled > midmax_scaled(f) ? 1 : 0);
    case ScaleMode::Option3: {
      // Round a to the format's precision (nearest even); a carry into the next binade moves
      // the exponent up.
      const int sh = 52 - f.mbits;
      uint64_t r = m >> sh;
      uint64_t rem = m & ((1ull << sh) - 1);
      uint64_t half = 1ull << (sh - 1);
      if (rem > half || (rem == half && (r & 1))) ++r;
      return binade + ((r >> (f.mbits + 1)) ? 1 : 0);
    }
    case ScaleMode::TopBinade: {
      double mx = ldexp_int(f.maxr, f.maxe - f.emax);
      return binade + (scaled > mx ? 1 : 0);
    }
    default:
      return binade;
  }
}

}  // namespace castscope::scalar
