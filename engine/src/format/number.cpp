#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "castscope/format.hpp"

namespace castscope {
namespace {

// Standard and framework names. One list serves parsing (every alias) and printing (the first
// alias of a spec is its canonical name).
struct Alias {
  const char* name;
  const char* spec;
};
constexpr Alias kAliases[] = {
    {"float32", "e8m23"},
    {"float16", "e5m10"},
    {"bfloat16", "e8m7"},
    {"fp32", "e8m23"},
    {"float", "e8m23"},
    {"fp16", "e5m10"},
    {"half", "e5m10"},
    {"bf16", "e8m7"},
    {"tf32", "e8m10"},
    {"tfloat32", "e8m10"},
    {"float8_e4m3fnuz", "e4m3b8fnuz"},
    {"float8_e5m2fnuz", "e5m2b16fnuz"},
    {"float8_e8m0fnu", "e8m0"},
    {"e8m0fnu", "e8m0"},
    {"float4_e2m1fn_x2", "e2m1"},
    {"float4_e2m1fn", "e2m1"},
    {"float6_e2m3fn", "e2m3"},
    {"float6_e3m2fn", "e3m2"},
};

struct Canonical {
  const char* spec;
  const char* name;
};
constexpr Canonical kCanonical[] = {
    {"e8m23", "float32"}, {"e5m10", "float16"}, {"e8m7", "bfloat16"}};

struct Native {
  const char* spec;
  const char* torch;
  const char* cuda;
};
constexpr Native kNative[] = {
    {"float32", "torch.float32", "float"},
    {"float16", "torch.float16", "__half"},
    {"bfloat16", "torch.bfloat16", "__nv_bfloat16"},
    {"e4m3fn", "torch.float8_e4m3fn", "__nv_fp8_e4m3"},
    {"e5m2", "torch.float8_e5m2", "__nv_fp8_e5m2"},
    {"e4m3b8fnuz", "torch.float8_e4m3fnuz", ""},
    {"e5m2b16fnuz", "torch.float8_e5m2fnuz", ""},
    {"e8m0", "torch.float8_e8m0fnu", "__nv_fp8_e8m0"},
    {"e2m1fnuz", "torch.float4_e2m1fn_x2 (packed pairs)", "__nv_fp4_e2m1"},
    {"e2m3fnuz", "", "__nv_fp6_e2m3"},
    {"e3m2fnuz", "", "__nv_fp6_e3m2"},
    {"int8", "torch.int8", "int8_t"},
    {"uint8", "torch.uint8", "uint8_t"},
    {"int16", "torch.int16", "int16_t"},
    {"uint16", "torch.uint16", "uint16_t"},
    {"int32", "torch.int32", "int32_t"},
    {"uint32", "torch.uint32", "uint32_t"},
};

// The OCP FP6/FP4 element types: written without a suffix they have neither Inf nor NaN.
bool is_ocp_finite_shape(int e, int m) {
  return (e == 2 && m == 1) || (e == 2 && m == 3) || (e == 3 && m == 2);
}

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw Error("number format '" + std::string(text) + "': " + why);
}

bool read_int(std::string_view s, size_t& pos, int& out) {
  size_t start = pos;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos == start || pos - start > 4) return false;
  out = 0;
  std::from_chars(s.data() + start, s.data() + pos, out);
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* to_string(InfNan v) {
  switch (v) {
    case InfNan::IEEE:
      return "ieee";
    case InfNan::FN:
      return "fn";
    case InfNan::FNUZ:
      return "fnuz";
    case InfNan::Finite:
      return "finite";
  }
  return "?";
}

NumberSpec NumberSpec::make_float(int ebits, int mbits, int bias, InfNan infnan) {
  NumberSpec n;
  n.f_ = scalar::float_format(ebits, mbits, bias, infnan);
  return n;
}

NumberSpec NumberSpec::make_int(int bits, bool is_signed) {
  NumberSpec n;
  n.f_ = scalar::int_format(bits, is_signed);
  return n;
}

NumberSpec NumberSpec::make_exponent(int ebits) {
  NumberSpec n;
  n.f_ = scalar::exponent_format(ebits);
  return n;
}

scalar::Format NumberSpec::integer_grid() const {
  scalar::Format g = f_;
  if (f_.kind == Kind::Int) {
    g.qmin = g.maxe = 0;
    g.emin = 0;
    int b = 0;
    for (uint64_t t = g.maxr; t > 1; t >>= 1) ++b;
    g.emax = g.maxbinade = b;
  }
  return g;
}

NumberSpec NumberSpec::parse(std::string_view text) {
  std::string s = lower(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  if (s.empty()) bad(text, "empty");
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  for (const Alias& a : kAliases) {
    if (s == a.name) return parse(a.spec);
  }
  if (s.rfind("float8_", 0) == 0) s = s.substr(7);
  if (s.rfind("uint", 0) == 0 || s.rfind("int", 0) == 0) {
    const bool is_signed = s[0] == 'i';
    size_t pos = is_signed ? 3 : 4;
    int k = 0;
    if (!read_int(s, pos, k) || pos != s.size())
      bad(text, "expected intK or uintK with a bit count, e.g. int8");
    if (k < 2 || k > 32) bad(text, "integer width must be between 2 and 32 bits");
    return make_int(k, is_signed);
  }
  if (s[0] != 'e')
    bad(text, "unknown format; expected eXmY[bZ][fn|fnuz], intK, uintK or a standard name");
  size_t pos = 1;
  int e = 0, m = 0, b = -1;
  if (!read_int(s, pos, e)) bad(text, "expected exponent bits after 'e'");
  if (pos >= s.size() || s[pos] != 'm')
    bad(text, "expected 'm' and mantissa bits after the exponent bits");
  ++pos;
  if (!read_int(s, pos, m)) bad(text, "expected mantissa bits after 'm'");
  if (pos < s.size() && s[pos] == 'b') {
    ++pos;
    if (!read_int(s, pos, b)) bad(text, "expected a bias after 'b'");
  }
  std::string_view suffix = std::string_view(s).substr(pos);
  InfNan mode;
  if (suffix.empty())
    mode = is_ocp_finite_shape(e, m) ? InfNan::Finite : InfNan::IEEE;
  else if (suffix == "fn")
    mode = InfNan::FN;
  else if (suffix == "fnuz")
    mode = InfNan::FNUZ;
  else
    bad(text, "unknown suffix '" + std::string(suffix) + "' (expected fn or fnuz)");
  if (e < 1 || e > 8) bad(text, "exponent bits must be between 1 and 8");
  if (m > 23) bad(text, "mantissa bits must be between 0 and 23");
  // TensorCast writes its integers as one exponent bit with bias 1: e1mYb1fnuz is int(Y+2).
  if (e == 1 && b == 1 && suffix == "fnuz") {
    if (m + 2 > 32) bad(text, "integer width must be between 2 and 32 bits");
    return make_int(m + 2, true);
  }
  if (m == 0 && mode == InfNan::IEEE) {
    if (b >= 0) bad(text, "an exponent format eXm0 takes no bias");
    return make_exponent(e);
  }
  if (m == 0 && mode == InfNan::FN)
    bad(text, "fn needs at least one mantissa bit (its NaN is the all-ones code)");
  if (e < 2 && mode == InfNan::IEEE) bad(text, "an IEEE format needs at least 2 exponent bits");
  const int default_bias = (1 << (e - 1)) - 1;
  if (b < 0) b = default_bias;
  if (b > (1 << e)) bad(text, "bias out of range for " + std::to_string(e) + " exponent bits");
  return make_float(e, m, b, mode);
}

std::string NumberSpec::name() const {
  const auto& f = f_;
  switch (f.kind) {
    case Kind::Int:
      return "int" + std::to_string(f.bits);
    case Kind::UInt:
      return "uint" + std::to_string(f.bits);
    case Kind::Exponent:
      return "e" + std::to_string(f.ebits) + "m0";
    case Kind::Float:
      break;
  }
  std::string s = "e" + std::to_string(f.ebits) + "m" + std::to_string(f.mbits);
  if (f.bias != (1 << (f.ebits - 1)) - 1) s += "b" + std::to_string(f.bias);
  if (f.infnan == InfNan::FN) s += "fn";
  // Finite formats print in TensorCast's spelling, which means the OCP format up to 6 bits.
  if (f.infnan == InfNan::FNUZ || (f.infnan == InfNan::Finite && f.bits <= 6)) s += "fnuz";
  if (f.infnan == InfNan::IEEE) {
    for (const Canonical& c : kCanonical)
      if (s == c.spec) return c.name;
  }
  return s;
}

double NumberSpec::max() const {
  return scalar::ldexp_int(f_.maxr, f_.maxe);
}
double NumberSpec::min_normal() const {
  if (is_int() || is_uint()) return std::ldexp(1.0, f_.qmin);
  return std::ldexp(1.0, f_.emin);
}
double NumberSpec::min_subnormal() const {
  return std::ldexp(1.0, f_.qmin);
}
double NumberSpec::midmax() const {
  return scalar::midmax_scaled(f_) * std::ldexp(1.0, f_.emax);
}
double NumberSpec::eps() const {
  if (is_uint()) return 1.0;
  return std::ldexp(1.0, -f_.mbits);
}
int64_t NumberSpec::int_min() const {
  if (is_int()) return -static_cast<int64_t>(f_.maxr);
  return 0;
}
int64_t NumberSpec::int_max() const {
  if (is_int() || is_uint()) return static_cast<int64_t>(f_.maxr);
  return 0;
}

static std::string hex_code(uint32_t c, int bits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*X", (bits + 3) / 4 % 9, c);
  return buf;
}

std::string NumberSpec::inf_encoding() const {
  if (!f_.has_inf) return "none";
  const uint32_t inf = ((1u << f_.ebits) - 1) << f_.mbits;
  return "+inf " + hex_code(inf, f_.bits) + ", -inf " +
         hex_code(inf | (1u << (f_.bits - 1)), f_.bits);
}

std::string NumberSpec::nan_encoding() const {
  if (!f_.has_nan) return "none";
  switch (f_.kind == Kind::Exponent ? InfNan::IEEE : f_.infnan) {
    case InfNan::IEEE:
      if (f_.kind == Kind::Exponent) return "all ones " + hex_code((1u << f_.bits) - 1, f_.bits);
      return "exponent all ones, mantissa non-zero (canonical " +
             hex_code(scalar::nan_code(f_), f_.bits) + ")";
    case InfNan::FN:
      return "all ones magnitude " + hex_code(scalar::nan_code(f_), f_.bits) + " (either sign)";
    case InfNan::FNUZ:
      return "negative zero " + hex_code(scalar::nan_code(f_), f_.bits);
    case InfNan::Finite:
      return "none";
  }
  return "none";
}

std::string NumberSpec::torch_name() const {
  const std::string n = name();
  for (const Native& x : kNative)
    if (n == x.spec) return x.torch;
  return "";
}
std::string NumberSpec::cuda_name() const {
  const std::string n = name();
  for (const Native& x : kNative)
    if (n == x.spec) return x.cuda;
  return "";
}

std::vector<CodeValue> NumberSpec::enumerate() const {
  if (f_.bits > 8)
    throw Error("format " + name() + " has " + std::to_string(f_.bits) +
                " bits; only formats of at most 8 bits are enumerated");
  std::vector<CodeValue> out;
  const double mx = max();
  for (uint32_t c = 0; c < (1u << f_.bits); ++c) {
    scalar::Quantized q = scalar::decode(c, f_);
    CodeValue cv{c, scalar::value_of(q, 0), ""};
    if (q.nan)
      cv.note = "nan";
    else if (q.inf)
      cv.note = q.neg ? "-inf" : "+inf";
    else if (cv.value == 0 && q.neg)
      cv.note = "-0";
    else if (std::fabs(cv.value) == mx)
      cv.note = cv.value > 0 ? "max" : "-max";
    else if (is_float() && q.r != 0 && q.r < (uint64_t{1} << f_.mbits))
      cv.note = "subnormal";
    if (is_int())
      cv.note =
          "q=" + std::to_string(q.neg ? -static_cast<int64_t>(q.r) : static_cast<int64_t>(q.r));
    out.push_back(cv);
  }
  return out;
}

bool NumberSpec::operator==(const NumberSpec& o) const {
  return f_.kind == o.f_.kind && f_.bits == o.f_.bits && f_.ebits == o.f_.ebits &&
         f_.mbits == o.f_.mbits && f_.bias == o.f_.bias && f_.infnan == o.f_.infnan;
}

}  // namespace castscope
