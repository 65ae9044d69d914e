// A slow reference for the CPU cast engine, written from the specification alone: it sees only
// the public API (NumberSpec properties, DataType, Tensor) and does its arithmetic in plain
// doubles. It must never share code with the fast path, so that both cannot be wrong together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "castscope/cast.hpp"

namespace oracle {

enum class ORound { Even, Away, Zero };
enum class OOverflow { Saturate, Ieee };
enum class OScale { Floor, Ceil, Midmax, Option3, TopBinade };

// What the oracle needs to know about a float number format, read from public properties.
struct FloatFmt {
  int ebits = 0, mbits = 0, bias = 0, emax = 0, emin = 0;
  double max = 0, min_sub = 0;
  bool has_inf = false, has_nan = false, has_negzero = true;
  std::string name;
};
FloatFmt describe(const castscope::NumberSpec& n);

// Correctly rounded cast of x to the float format (value as a double). Overflow is decided after
// rounding on the grid extended above max with the top binade's spacing.
double round_float(double x, const FloatFmt& f, ORound r, OOverflow o);
// Nearest integer of x with the tie rule of r.
double round_int(double x, ORound r);

// Unbiased shared exponent (before clamping) of a tile whose largest finite magnitude is absmax
// (> 0) for element format n under scale mode m; integer data always uses floor.
int select_exponent(double absmax, const castscope::NumberSpec& n, OScale m);

// The values (float32) of a virtual cast, computed element by element from the spec. Supports
// unscaled floats, exponent scales (tensor / channel / 1-D / 2-D tiles, subtiles with
// microexponents), float scales for float / int data, multiscale (NVFP4). Throws
// std::runtime_error("oracle: unsupported ...") for anything else (uint zero points, sparsity,
// TCFP), so a caller can tell a gap in the oracle from a disagreement.
struct Options {
  ORound round = ORound::Even;
  OOverflow overflow = OOverflow::Saturate;
  OScale scale = OScale::Floor;
  int axis = -1;
  // When set, elements whose result the spec leaves open are marked 1 (and not compared).
  std::vector<uint8_t>* open = nullptr;
  // When set, receives the number of finite inputs that saturated (or clamped, for integers).
  int64_t* clipped = nullptr;
};
std::vector<float> cast_values(const std::vector<float>& x, const std::vector<int64_t>& shape,
                               const castscope::DataType& d, const Options& o);
bool supports(const castscope::DataType& d);

// The seed of a test's random inputs: CASTSCOPE_TEST_SEED when set (to replay a failure),
// otherwise fresh from the clock. Tests print it with every failure.
uint64_t test_seed();

// float32 bit helpers.
uint32_t bits_of(float f);
float from_bits(uint32_t b);
// True when a and b are the same float32 bits, or both NaN.
bool same(float a, float b);

}  // namespace oracle
