// Every bfloat16 bit pattern through every float format of at most 8 bits, in every
// deterministic round mode and both overflow policies, against the oracle, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <cstring>
#include <limits>
#include <sstream>

#include "oracle.hpp"
#include "test_seed.hpp"

using namespace castscope;
using oracle::OOverflow;
using oracle::ORound;

namespace {

const char* kFormats[] = {"e4m3fn",   "e5m2",     "e4m3b8fnuz", "e5m2b16fnuz", "e4m3fnuz",
                          "e3m2fnuz", "e2m3fnuz", "e2m1fnuz",   "e2m1",        "e3m2",
                          "e2m3",     "e3m4",     "e5m2fnuz",   "e4m3b9",      "e4m3",
                          "e3m3",     "e2m2",     "e5m1",       "e6m1",        "e2m5"};

struct Mode {
  const char* round;
  ORound oround;
};
const Mode kRounds[] = {{"even", ORound::Even}, {"away", ORound::Away}, {"zero", ORound::Zero}};
const std::pair<const char*, OOverflow> kOverflows[] = {{"saturate", OOverflow::Saturate},
                                                        {"ieee", OOverflow::Ieee}};

// A cast on the CPU with this rounding and overflow.
CastOptions cpu_options(const Mode& m, const char* overflow) {
  CastOptions opt;
  opt.device = Device::CPU;
  opt.round = parse_round(m.round);
  opt.overflow = parse_overflow(overflow);
  return opt;
}

Tensor all_bf16() {
  Tensor t = Tensor::empty(DType::BF16, {65536});
  uint16_t* p = t.mutable_ptr<uint16_t>();
  for (uint32_t i = 0; i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
  return t;
}

float bf16_value(uint32_t b) {
  return oracle::from_bits(b << 16);
}

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Formats the grammar accepts; a format it rejects is skipped with a note, not a failure,
// because the list includes odd shapes on purpose.
std::vector<NumberSpec> formats() {
  std::vector<NumberSpec> out;
  // Every element format of at most 8 bits that a registry datatype uses, then the list above.
  for (const RegistryEntry& e : registry()) {
    const NumberSpec n = DataType::parse(e.name).number();
    if (n.is_float() && n.bits() <= 8 && std::find(out.begin(), out.end(), n) == out.end())
      out.push_back(n);
  }
  for (const char* f : kFormats) {
    try {
      NumberSpec n = NumberSpec::parse(f);
      if (n.is_float() && n.bits() <= 8 && std::find(out.begin(), out.end(), n) == out.end())
        out.push_back(n);
    } catch (const Error& e) {
      std::cerr << "format " << f << " not accepted: " << e.what() << "\n";
    }
  }
  return out;
}

// The oracle itself is checked against the published format table: every value it returns
// must be a code value of the format.
TEST(OracleSelfCheck, ResultsAreRepresentable) {
  for (const NumberSpec& n : formats()) {
    const oracle::FloatFmt f = oracle::describe(n);
    std::set<double> values;
    bool table_nan = false, table_inf = false, table_negzero = false;
    for (const CodeValue& c : n.enumerate()) {
      if (std::isnan(c.value))
        table_nan = true;
      else if (std::isinf(c.value))
        table_inf = true;
      else
        values.insert(c.value);
      if (c.value == 0 && std::signbit(c.value)) table_negzero = true;
    }
    EXPECT_EQ(f.has_nan, table_nan) << n.name();
    EXPECT_EQ(f.has_inf, table_inf) << n.name();
    EXPECT_EQ(f.has_negzero, table_negzero) << n.name();
    EXPECT_EQ(*values.rbegin(), f.max) << n.name();
    for (uint32_t b = 0; b < 65536; ++b) {
      const float x = bf16_value(b);
      for (const Mode& m : kRounds) {
        const double q = oracle::round_float(x, f, m.oround, OOverflow::Saturate);
        if (std::isnan(x)) continue;
        ASSERT_TRUE(values.count(q)) << n.name() << " x=" << x << " q=" << q;
        // Nearest: no representable value lies strictly closer to x.
        if (std::isfinite(x) && std::fabs(x) <= f.max) {
          auto hi = values.lower_bound(x);
          double best = std::fabs(*hi - x);
          if (hi != values.begin()) best = std::min(best, std::fabs(*std::prev(hi) - x));
          ASSERT_EQ(std::fabs(q - x), best) << n.name() << " x=" << x;
        }
      }
    }
  }
}

TEST(OracleSelfCheck, KnownValues) {
  const auto e4 = oracle::describe(NumberSpec::parse("e4m3fn"));
  EXPECT_EQ(oracle::round_float(464, e4, ORound::Even, OOverflow::Ieee), 448);
  EXPECT_TRUE(std::isnan(oracle::round_float(464, e4, ORound::Away, OOverflow::Ieee)));
  EXPECT_EQ(oracle::round_float(464, e4, ORound::Away, OOverflow::Saturate), 448);
  EXPECT_EQ(oracle::round_float(0x1p-10, e4, ORound::Even, OOverflow::Ieee), 0);
  EXPECT_EQ(oracle::round_float(0x1.8p-9, e4, ORound::Zero, OOverflow::Ieee), 0x1p-9);
  EXPECT_EQ(oracle::round_float(0x1.8p-9, e4, ORound::Even, OOverflow::Ieee), 0x1p-8);
  const auto e5 = oracle::describe(NumberSpec::parse("e5m2"));
  EXPECT_TRUE(std::isinf(oracle::round_float(61440, e5, ORound::Even, OOverflow::Ieee)));
  EXPECT_EQ(oracle::round_float(61440, e5, ORound::Zero, OOverflow::Ieee), 57344);
  const auto f4 = oracle::describe(NumberSpec::parse("e2m1fnuz"));
  EXPECT_EQ(oracle::round_float(2.5, f4, ORound::Even, OOverflow::Saturate), 2);
  EXPECT_EQ(oracle::round_float(2.5, f4, ORound::Away, OOverflow::Saturate), 3);
  EXPECT_EQ(oracle::round_float(5, f4, ORound::Even, OOverflow::Saturate), 4);
  // Decision 9: e2m1fnuz keeps -0 and has no NaN, so an overflow under ieee saturates.
  EXPECT_TRUE(std::signbit(oracle::round_float(-0.1, f4, ORound::Even, OOverflow::Saturate)));
  EXPECT_EQ(oracle::round_float(-0.2, f4, ORound::Even, OOverflow::Saturate), 0.0);
  EXPECT_TRUE(std::signbit(oracle::round_float(-0.2, f4, ORound::Even, OOverflow::Saturate)));
  EXPECT_EQ(oracle::round_float(-0.3, f4, ORound::Even, OOverflow::Saturate), -0.5);
  EXPECT_EQ(oracle::round_float(std::nan(""), f4, ORound::Even, OOverflow::Saturate), 0.0);
  EXPECT_EQ(oracle::round_float(7, f4, ORound::Even, OOverflow::Ieee), 6);
}

// Non-finite inputs under saturate are the one place the spec leaves open for formats without the
// special value; the assumption checked here: NaN -> NaN where the target has NaN; +-Inf under
// saturate -> +-max; under ieee -> +-Inf (IEEE formats) or NaN (fn / fnuz); formats without
// special codes saturate. Results for NaN into a format with no NaN are only reported.
TEST(UnscaledSweep, AllBf16PatternsEveryFormatRoundAndOverflow) {
  const Tensor x = all_bf16();
  int64_t checked = 0;
  for (const NumberSpec& n : formats()) {
    const oracle::FloatFmt f = oracle::describe(n);
    const DataType d = DataType::make(n, std::nullopt);
    for (const Mode& m : kRounds)
      for (const auto& [ovname, ov] : kOverflows) {
        const CastOptions opt = cpu_options(m, ovname);
        const CastResult r = cast(x, d, opt);
        ASSERT_EQ(r.values.dtype(), DType::F32);
        ASSERT_EQ(r.values.numel(), 65536);
        const float* got = r.values.ptr<float>();
        int mismatches = 0;
        for (uint32_t b = 0; b < 65536; ++b) {
          const float in = bf16_value(b);
          if (std::isnan(in) && !f.has_nan) {
            continue;  // unspecified
          }
          const float want = static_cast<float>(oracle::round_float(in, f, m.oround, ov));
          ++checked;
          if (!oracle::same(want, got[b]) && ++mismatches <= 5)
            ADD_FAILURE() << n.name() << " round=" << m.round << " overflow=" << ovname
                          << " bf16=" << hex(b) << " x=" << in << " want=" << want << " ("
                          << hex(oracle::bits_of(want)) << ") got=" << got[b] << " ("
                          << hex(oracle::bits_of(got[b])) << ")";
        }
        EXPECT_EQ(mismatches, 0) << n.name() << " " << m.round << " " << ovname;
        if (ov == OOverflow::Saturate) {
          // clipped counts the finite inputs whose rounded magnitude exceeds max.
          oracle::FloatFmt unbounded = f;
          unbounded.max = std::numeric_limits<double>::infinity();
          int64_t clipped = 0;
          for (uint32_t b = 0; b < 65536; ++b) {
            const float in = bf16_value(b);
            if (std::isfinite(in) &&
                std::fabs(oracle::round_float(in, unbounded, m.oround, ov)) > f.max)
              ++clipped;
          }
          EXPECT_EQ(r.counts.clipped, clipped) << n.name() << " " << m.round;
          EXPECT_EQ(r.counts.nonfinite, 2 * 127 + 2) << n.name();  // bf16 NaNs and +-Inf
        }
      }
  }
  EXPECT_GT(checked, 65536 * 6 * 14);
}

// The same sweep through a float32 tensor: the input dtype must not change the result.
TEST(UnscaledSweep, Float32InputMatchesBf16Input) {
  Tensor x32 = Tensor::empty(DType::F32, {256, 256});
  float* p = x32.mutable_ptr<float>();
  for (uint32_t b = 0; b < 65536; ++b) p[b] = bf16_value(b);
  for (const char* name : {"e4m3fn", "e5m2", "e2m1fnuz", "e3m2", "e4m3b8fnuz"}) {
    const DataType d = DataType::parse(name);
    CastOptions opt;
    opt.device = Device::CPU;
    const Tensor a = cast(x32, d, opt).values;
    const Tensor b = cast(all_bf16(), d, opt).values;
    for (int64_t i = 0; i < 65536; ++i)
      ASSERT_TRUE(oracle::same(a.ptr<float>()[i], b.ptr<float>()[i])) << name << " i=" << i;
  }
}

// Decision 12: -0 casts to -0 wherever the target holds it; fnuz formats have no -0.
TEST(UnscaledSweep, NegativeZero) {
  Tensor x = Tensor::empty(DType::F32, {3});
  x.mutable_ptr<float>()[0] = -0.0f;
  x.mutable_ptr<float>()[1] = -1e-30f;  // underflows to zero
  x.mutable_ptr<float>()[2] = 0.0f;
  for (const NumberSpec& n : formats()) {
    const oracle::FloatFmt f = oracle::describe(n);
    CastOptions opt;
    opt.device = Device::CPU;
    const Tensor v = cast(x, DataType::make(n, std::nullopt), opt).values;
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(v.ptr<float>()[i], 0.0f) << n.name();
      EXPECT_EQ(std::signbit(v.ptr<float>()[i]), f.has_negzero) << n.name() << " i=" << i;
    }
    EXPECT_FALSE(std::signbit(v.ptr<float>()[2])) << n.name();
  }
}

}  // namespace

namespace {

// float64 and float16 inputs are rounded once, from the input value itself: a double just above
// a tie of the target must round up even though its float32 rounding sits on the tie.
TEST(UnscaledSweep, Float64AndFloat16InputsRoundOnce) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  for (const char* name :
       {"e4m3fn", "e5m2", "e2m1fnuz", "e3m2", "bfloat16", "float16", "e4m3b8fnuz"}) {
    const NumberSpec n = NumberSpec::parse(name);
    const oracle::FloatFmt f = oracle::describe(n);
    const int64_t count = 4096;
    Tensor x = Tensor::empty(DType::F64, {count});
    double* p = x.mutable_ptr<double>();
    std::uniform_int_distribution<int> e(f.emin - f.mbits - 2, f.emax + 1);
    std::uniform_int_distribution<int> m(0, (1 << std::min(f.mbits, 12)) * 2 - 1);
    for (int64_t i = 0; i < count; ++i) {
      // A tie of the target grid (odd multiple of half an ulp), nudged by less than float32 sees.
      const double tie = std::ldexp(2.0 * m(rng) + 1, e(rng) - f.mbits - 1);
      const double nudge = (i % 3 == 0) ? 0 : ((i % 3 == 1) ? 1 : -1) * std::ldexp(tie, -40);
      p[i] = ((i / 3) % 2 ? -1 : 1) * (tie + nudge);
    }
    for (const char* round : {"even", "away", "zero"}) {
      CastOptions opt;
      opt.device = Device::CPU;
      opt.round = parse_round(round);
      const ORound orr =
          round[0] == 'e' ? ORound::Even : (round[0] == 'a' ? ORound::Away : ORound::Zero);
      const Tensor v = cast(x, DataType::make(n, std::nullopt), opt).values;
      int bad = 0;
      for (int64_t i = 0; i < count; ++i) {
        const float want =
            static_cast<float>(oracle::round_float(p[i], f, orr, OOverflow::Saturate));
        const float got = v.ptr<float>()[i];
        if (!oracle::same(want, got) && ++bad <= 3)
          ADD_FAILURE() << name << " round=" << round << " float64 x=" << std::hexfloat << p[i]
                        << " want=" << want << " got=" << got << std::defaultfloat
                        << " seed=" << seed;
      }
      EXPECT_EQ(bad, 0) << name << " " << round;
    }
  }
  // float16 inputs: every pattern.
  Tensor h = Tensor::empty(DType::F16, {65536});
  for (uint32_t b = 0; b < 65536; ++b) h.mutable_ptr<uint16_t>()[b] = static_cast<uint16_t>(b);
  const Tensor hf = h.to_f32();
  for (const char* name : {"e4m3fn", "e2m1fnuz", "e5m2", "e3m4"}) {
    const NumberSpec n = NumberSpec::parse(name);
    const oracle::FloatFmt f = oracle::describe(n);
    CastOptions opt;
    opt.device = Device::CPU;
    const Tensor v = cast(h, DataType::make(n, std::nullopt), opt).values;
    int bad = 0;
    for (uint32_t b = 0; b < 65536; ++b) {
      const float in = hf.ptr<float>()[b];
      const float want =
          static_cast<float>(oracle::round_float(in, f, ORound::Even, OOverflow::Saturate));
      if (!oracle::same(want, v.ptr<float>()[b]) && ++bad <= 3)
        ADD_FAILURE() << name << " float16 " << hex(b) << " x=" << in << " want=" << want
                      << " got=" << v.ptr<float>()[b];
    }
    EXPECT_EQ(bad, 0) << name;
  }
}

}  // namespace

namespace {

// 16-bit targets: random float32 bit patterns and exact ties of the target grid (a target value
// plus half an ulp, in float32), every round mode and overflow policy.
TEST(UnscaledSweep, SixteenBitTargetsRandomAndTies) {
  const uint64_t seed = oracle::test_seed();
  std::mt19937_64 rng(seed);
  const int64_t count = 1 << 18;
  for (const char* name : {"float16", "bfloat16", "e5m6", "e6m5fnuz", "e8m7fn"}) {
    NumberSpec n;
    try {
      n = NumberSpec::parse(name);
    } catch (const Error& e) {
      std::cerr << name << " not accepted: " << e.what() << "\n";
      continue;
    }
    const oracle::FloatFmt f = oracle::describe(n);
    std::vector<float> x(count);
    for (int64_t i = 0; i < count; ++i) {
      if (i % 2) {
        x[i] = oracle::from_bits(static_cast<uint32_t>(rng()));
      } else {
        // A tie: odd multiple of half an ulp in a random binade of the target.
        const int e = f.emin + static_cast<int>(rng() % (f.emax - f.emin + 3)) - 1;
        const double m = static_cast<double>(rng() % (1u << f.mbits));
        const double tie = std::ldexp(2 * (m + std::ldexp(1.0, f.mbits)) + 1, e - f.mbits - 1);
        x[i] = static_cast<float>((rng() & 1) ? -tie : tie);
      }
    }
    Tensor t = Tensor::empty(DType::F32, {count});
    std::memcpy(t.mutable_data(), x.data(), count * sizeof(float));
    for (const Mode& m : kRounds)
      for (const auto& [ovname, ov] : kOverflows) {
        const CastOptions opt = cpu_options(m, ovname);
        const Tensor v = cast(t, DataType::make(n, std::nullopt), opt).values;
        int bad = 0;
        for (int64_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(oracle::round_float(x[i], f, m.oround, ov));
          const float got = v.ptr<float>()[i];
          if (!oracle::same(want, got) && ++bad <= 3)
            ADD_FAILURE() << name << " round=" << m.round << " overflow=" << ovname << " x=" << x[i]
                          << " (" << hex(oracle::bits_of(x[i])) << ") want=" << want
                          << " got=" << got << " seed=" << seed;
        }
        EXPECT_EQ(bad, 0) << name << " " << m.round << " " << ovname;
      }
  }
}

}  // namespace

namespace {

// The codes of an actual cast, read through the published code table (NumberSpec::enumerate),
// hold the oracle's values: the encoder is checked apart from the decoder.
TEST(UnscaledSweep, ActualCodesDecodeThroughTheTable) {
  const Tensor x = all_bf16();
  for (const NumberSpec& n : formats()) {
    const oracle::FloatFmt f = oracle::describe(n);
    const std::vector<CodeValue> table = n.enumerate();
    for (const auto& [ovname, ov] : kOverflows) {
      CastOptions opt;
      opt.device = Device::CPU;
      opt.mode = CastMode::Actual;
      opt.overflow = parse_overflow(ovname);
      const CastResult r = cast(x, DataType::make(n, std::nullopt), opt);
      ASSERT_EQ(dtype_size(r.codes.dtype()), 1u) << n.name();
      ASSERT_EQ(r.codes.numel(), 65536);
      const uint8_t* c = static_cast<const uint8_t*>(r.codes.data());
      int bad = 0;
      for (uint32_t b = 0; b < 65536; ++b) {
        const float in = bf16_value(b);
        if (std::isnan(in) && !f.has_nan) continue;
        ASSERT_LT(c[b], table.size()) << n.name();
        const double want = oracle::round_float(in, f, ORound::Even, ov);
        const double got = table[c[b]].value;
        const bool ok = std::isnan(want) ? std::isnan(got)
                                         : (want == got && std::signbit(want) == std::signbit(got));
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << n.name() << " " << ovname << " bf16=" << hex(b) << " x=" << in
                        << " code=" << int(c[b]) << " decodes to " << got << ", want " << want;
      }
      EXPECT_EQ(bad, 0) << n.name() << " " << ovname;
    }
  }
}

}  // namespace
