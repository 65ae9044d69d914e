// Datatype strings (decision 1): printing a parsed datatype and parsing it again gives the same
// datatype, for every registry entry and for randomly built strings; malformed strings are
// Errors that name the offending segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "castscope/datatype.hpp"
#include "test_seed.hpp"

using castscope::DataType;
using castscope::Error;
using castscope::NumberSpec;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void expect_round_trip(const std::string& text, const std::string& context) {
  DataType d;
  try {
    d = DataType::parse(text);
  } catch (const Error& e) {
    ADD_FAILURE() << context << ": \"" << text << "\" does not parse: " << e.what();
    return;
  }
  const std::string printed = d.str();
  DataType again;
  try {
    again = DataType::parse(printed);
  } catch (const Error& e) {
    ADD_FAILURE() << context << ": printed form \"" << printed << "\" of \"" << text
                  << "\" does not parse: " << e.what();
    return;
  }
  EXPECT_TRUE(again == d) << context << ": \"" << text << "\" -> \"" << printed << "\" -> \""
                          << again.str() << "\"";
  EXPECT_EQ(again.str(), printed) << context << ": printing is not stable for \"" << text << "\"";
}

TEST(DatatypeStrings, RegistryRoundTrip) {
  ASSERT_GT(castscope::registry().size(), 20u);
  for (const auto& e : castscope::registry()) {
    expect_round_trip(e.name, "registry name");
    expect_round_trip(e.spec, "registry spec");
    const DataType by_name = DataType::parse(e.name);
    if (by_name.family() == castscope::Family::Standard) {
      EXPECT_TRUE(by_name == DataType::parse(e.spec)) << e.name << " vs " << e.spec;
    }
    EXPECT_EQ(by_name.name(), e.name);
    EXPECT_TRUE(castscope::find_registry(e.name) != nullptr) << e.name;
  }
}

// Random strings built from the grammar: NSPEC[_SSPEC] where SSPEC is one or two number specs and
// zero, one or two tile segments t<T>[s<S>][n<N>m<M>] (channel: t or t0).
struct Gen {
  std::mt19937_64 rng;
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

  std::string float_spec() {
    static const char* named[] = {"e4m3fn",   "e5m2",     "e4m3b8fnuz", "e5m2b16fnuz", "e2m1fnuz",
                                  "e3m2fnuz", "e2m3fnuz", "e2m1",       "e3m2",        "e2m3",
                                  "e3m4",     "e4m3fnuz", "e5m2fnuz",   "e4m3b9",      "bfloat16",
                                  "float16",  "float32",  "e5m6",       "e6m3",        "e3m3"};
    return named[pick(20)];
  }
  std::string int_spec() { return "int" + std::to_string(2 + pick(15)); }
  std::string uint_spec() { return "uint" + std::to_string(2 + pick(15)); }
  std::string float_scale() {
    static const char* s[] = {"float32", "float16", "bfloat16", "e4m3fn", "e5m2"};
    return s[pick(5)];
  }
  std::string exp_scale() {
    static const char* s[] = {"e8m0", "e5m0", "e6m0", "e8m0"};
    return s[pick(4)];
  }
  std::string tile(bool allow_sub, bool allow_sparse) {
    if (pick(6) == 0) return pick(2) ? "t" : "t0";
    const int t = 1 << (1 + pick(8));  // 2 .. 256
    std::string s = "t" + std::to_string(t);
    if (allow_sub && t >= 4 && pick(3) == 0) {
      s += "s" + std::to_string(1 << pick(std::min(4, log2i(t))));
      if (pick(2)) s += "o" + std::to_string(1 + pick(2));
    }
    if (allow_sparse && t >= 4 && pick(3) == 0) {
      const int m = 1 << (1 + pick(std::min(3, log2i(t))));  // 2, 4 or 8, dividing t
      s += "n" + std::to_string(1 + pick(m - 1)) + "m" + std::to_string(m);
    }
    return s;
  }
  static int log2i(int v) {
    int k = 0;
    while ((1 << (k + 1)) <= v) ++k;
    return k;
  }
  std::string datatype() {
    const int kind = pick(10);
    if (kind == 0) return float_spec();  // unscaled
    const bool is_uint = kind <= 3;
    const bool exp = !is_uint && pick(2);
    // Subtiles carry a shared microexponent, so they need an exponent scale.
    std::string tiles;
    const int nt = pick(3);
    if (nt == 1) tiles = "_" + tile(exp, true);
    if (nt == 2) {
      const std::string a = tile(false, false);
      std::string b = tile(false, false);
      if (a.size() <= 2 && b.size() <= 2) b = "t16";  // at most one channel axis
      tiles = "_" + a + "_" + b;
    }
    if (is_uint)
      return uint_spec() + "_" + float_scale() + "_" + (pick(2) ? "int8" : float_scale()) + tiles;
    const std::string data = kind <= 6 ? float_spec() : int_spec();
    std::string scale = exp ? exp_scale() : float_scale();
    if (!exp && pick(3) == 0 && !tiles.empty()) scale += "_float32";  // multiscale
    return data + "_" + scale + tiles;
  }
};

TEST(DatatypeStrings, RandomRoundTrip) {
  const uint64_t seed = castscope::test::test_seed();
  Gen g{std::mt19937_64(seed)};
  int parsed = 0, rejected = 0;
  std::vector<std::string> rejections;
  for (int i = 0; i < 1500; ++i) {
    const std::string s = g.datatype();
    DataType d;
    try {
      d = DataType::parse(s);
    } catch (const Error& e) {
      ++rejected;
      if (rejections.size() < 10) rejections.push_back(s + ": " + e.what());
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << s << ": not a castscope::Error: " << e.what();
      continue;
    }
    ++parsed;
    expect_round_trip(s, "random (seed " + std::to_string(seed) + ")");
    // Equivalent spellings print the same: upper case and the t0 channel alias.
    std::string upper = s;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    try {
      EXPECT_TRUE(DataType::parse(upper) == d) << s << " vs " << upper;
    } catch (const Error&) {
      // Upper case is a convenience of number specs; rejecting it is allowed.
    }
  }
  std::string why;
  for (const auto& r : rejections) why += "\n  " + r;
  EXPECT_GE(parsed, 500) << "seed " << seed << ", rejected " << rejected << ":" << why;
  // The generator follows the grammar; a rejection rate above a few percent means the grammar
  // and the parser disagree.
  EXPECT_LE(rejected, 1500 / 20) << "seed " << seed << why;
}

struct Malformed {
  const char* text;
  const char* names;  // what the message must contain (the offending segment)
};

const Malformed kMalformed[] = {
    {"e4m3fnx", "e4m3fnx"},
    {"foo_e8m0_t32", "foo"},
    {"e4m3fn_foo_t32", "foo"},
    {"e4m3fn_e8m0x_t32", "e8m0x"},
    {"e4m3fn_e8m0_t32x", "t32x"},
    {"e4m3fn_e8m0_tx", "tx"},
    {"e4m3fn_e8m0_tt32", "tt32"},
    {"e4m3fn_e8m0_s2", "s2"},
    {"e4m3fn_e8m0_t32s", "t32s"},
    {"e4m3fn_e8m0_t32n2", "t32n2"},
    {"e4m3fn_e8m0_t32m4", "t32m4"},
    {"e4m3fn_e8m0_t32n2m", "t32n2m"},
    {"e4m3fn_e8m0_t32s2s2", "t32s2s2"},
    {"e4m3fn_e8m0_t32o1", "t32o1"},
    {"e4m3fn_e8m0_t32s2o3", "t32s2o3"},
    {"e4m3fn_e8m0_t32s2o1o1", "t32s2o1o1"},
    {"e4m3fn_e8m0_t32n2m4n2m4", "t32n2m4n2m4"},
    {"e4m3fn_e8m0_t32s64", "s64"},
    {"e4m3fn_e8m0_t32n4m2", "n4m2"},
    {"e4m3fn_e8m0_t32n0m4", "n0m4"},
    {"e4m3fn_e8m0_t32n2m0", "m0"},
    {"e4m3fn_e8m0_t-32", "t-32"},
    {"e4m3fn_e8m0_t3.2", "t3.2"},
    {"e4m3fn_e8m0_t1e3", "t1e3"},
    {"e4m3fn_e8m0_t99999999999999999999", "t99999999999999999999"},
    {"e4m3fn_e8m0_t32_t32_t32", "t32"},
    {"e4m3fn_e8m0_float32_float32_t32", "float32"},
    {"e4m3fn_t32", "t32"},
    {"e4m3fn__e8m0", "e4m3fn__e8m0"},
    {"e4m3fn_e8m0_", "e4m3fn_e8m0_"},
    {"_e4m3fn", "_e4m3fn"},
    {"e4m3fn_e8m0_t32_", "e4m3fn_e8m0_t32_"},
    {"int0_e8m0_t32", "int0"},
    {"int1_e8m0_t32", "int1"},
    {"uint33_float16_int8", "uint33"},
    {"int99999999999_e8m0", "int99999999999"},
    {"e4m3fnfn", "e4m3fnfn"},
    {"e4m3bx", "e4m3bx"},
    {"e4m", "e4m"},
    {"m3", "m3"},
    {"e0m3", "e0m3"},
    {"e4m-3", "e4m-3"},
    {"float8_e4m3fnx", "float8_e4m3fnx"},
    {"torch.float9", "torch.float9"},
    {"e4m3fn e8m0", "e4m3fn e8m0"},
    {"e4m3fn_e8m0_t 32", "t 32"},
    {"e4m3fn_e8m0_t32\x01", "t32"},
    {"e4m3fn_e8m0_t32_t16_t8", "t8"},
    {"e99m3", "e99m3"},
    {"e4m3fn_e8m0_t32s3", "s3"},
    {"e4m3fn_e8m0_t32n2m3", "n2m3"},
};

TEST(DatatypeStrings, MalformedStringsNameTheSegment) {
  static_assert(sizeof(kMalformed) / sizeof(kMalformed[0]) >= 40);
  for (const Malformed& m : kMalformed) {
    try {
      const DataType d = DataType::parse(m.text);
      ADD_FAILURE() << "\"" << m.text << "\" parsed as " << d.str();
    } catch (const Error& e) {
      // The message quotes the whole string; the offending segment must be named on its own.
      std::string msg = lower(e.what());
      const std::string whole = lower(m.text);
      if (whole != lower(m.names))
        for (size_t at; !whole.empty() && (at = msg.find(whole)) != std::string::npos;)
          msg.erase(at, whole.size());
      EXPECT_NE(msg.find(lower(m.names)), std::string::npos)
          << "\"" << m.text << "\": message \"" << e.what() << "\" does not name \"" << m.names
          << "\"";
    } catch (const std::exception& e) {
      ADD_FAILURE() << "\"" << m.text << "\": not a castscope::Error: " << e.what();
    }
  }
  // The empty string and lone separators are errors too (nothing to name but the whole).
  for (const char* s : {"", "_", "__", "___"}) EXPECT_THROW(DataType::parse(s), Error) << s;
}

// Bytes that are not part of any datatype string never crash the parser.
TEST(DatatypeStrings, RandomBytesNeverCrash) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  const std::string alphabet = "efmbnstuiz0123456789_x.-";
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    try {
      const DataType d = DataType::parse(s);
      ++accepted;
      EXPECT_TRUE(DataType::parse(d.str()) == d) << s << " seed " << seed;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "\"" << s << "\": not a castscope::Error: " << e.what() << " seed " << seed;
    }
  }
  (void)accepted;
}

}  // namespace

namespace castscope {
namespace {

// Bits per value on an axis of L values: ceil(L / T) tiles each carry a whole scale, so a
// partial tile (an axis shorter than the tile, or not a multiple of it) costs more per value.
TEST(DatatypeStrings, BitsPerValueChargeAPartialTileItsScale) {
  const DataType mx = DataType::parse("mxfp8e4");
  EXPECT_DOUBLE_EQ(mx.bits_per_value(), 8.25);
  EXPECT_DOUBLE_EQ(mx.bits_per_value(4096), 8.25);
  EXPECT_DOUBLE_EQ(mx.bits_per_value(3), 8 + 8.0 / 3);
  EXPECT_DOUBLE_EQ(mx.bits_per_value(100), 8 + 8.0 * 4 / 100);
  // A channel scale: one per axis, as before.
  EXPECT_DOUBLE_EQ(DataType::parse("int8_float32_t0").bits_per_value(64), 8 + 32.0 / 64);
  // A 2-D tile: the rows segment stays nominal, the axis segment is charged per started tile.
  EXPECT_DOUBLE_EQ(DataType::parse("e4m3fn_float32_t128_t128").bits_per_value(200),
                   8 + 32.0 / (128 * 100.0));
}

}  // namespace
}  // namespace castscope
