// NumberSpec: one number format (float eXmY[bZ][fn|fnuz], intK, uintK, exponent eXm0) and every
// fact about it, derived from its parameters in one place (number.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "castscope/error.hpp"
#include "castscope/scalar.hpp"

namespace castscope {

using scalar::InfNan;
using scalar::Kind;

struct CodeValue {
  uint32_t code;
  double value;      // NaN / +-Inf for the special codes
  std::string note;  // "nan", "+inf", "-0", "subnormal", "max", ... (empty for ordinary values)
};

class NumberSpec {
 public:
  NumberSpec() = default;

  // Accepts eXmY[bZ][fn|fnuz], intK, uintK, eXm0, standard names (float32, bfloat16, ...) and
  // torch names (float8_e4m3fn, torch.bfloat16, ...). Throws Error naming the string.
  static NumberSpec parse(std::string_view text);
  static NumberSpec make_float(int ebits, int mbits, int bias, InfNan infnan);
  static NumberSpec make_int(int bits, bool is_signed);
  static NumberSpec make_exponent(int ebits);

  // Canonical string: parse(name()) == *this.
  std::string name() const;
  const scalar::Format& format() const { return f_; }
  // The grid used when this integer format carries a float scale: plain integers q.
  scalar::Format integer_grid() const;

  Kind kind() const { return f_.kind; }
  bool is_float() const { return f_.kind == Kind::Float; }
  bool is_int() const { return f_.kind == Kind::Int; }
  bool is_uint() const { return f_.kind == Kind::UInt; }
  bool is_exponent() const { return f_.kind == Kind::Exponent; }
  int bits() const { return f_.bits; }
  int ebits() const { return f_.ebits; }
  int mbits() const { return f_.mbits; }
  int bias() const { return f_.bias; }
  int emax() const { return f_.emax; }
  int emin() const { return f_.emin; }
  InfNan infnan() const { return f_.infnan; }

  double max() const;            // largest finite value
  double min_normal() const;     // smallest positive normal (floats, exponents)
  double min_subnormal() const;  // smallest positive value
  double midmax() const;         // max + half a quantum of the top binade (decision 3)
  double eps() const;            // 2^-mbits for floats
  int64_t int_min() const;       // integer range of the codes (ints / uints)
  int64_t int_max() const;
  std::string inf_encoding() const;  // human-readable; "none" where absent
  std::string nan_encoding() const;
  std::string torch_name() const;  // "" when torch has no such dtype
  std::string cuda_name() const;   // "" when CUDA has no such type

  // Every code and its value, for formats of at most 8 bits (throws otherwise).
  std::vector<CodeValue> enumerate() const;

  bool operator==(const NumberSpec& o) const;
  bool operator!=(const NumberSpec& o) const { return !(*this == o); }

 private:
  scalar::Format f_;
};

const char* to_string(InfNan v);

}  // namespace castscope
