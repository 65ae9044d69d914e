// Codebook casts against reference outputs produced by running TensorCast itself
// (tools/codebook_reference.py; data in tests/codebook/data). Values, chosen mappings and tile
// scales must agree bit for bit, except in the tiles the manifest sets aside by name, each for a
// documented difference of TensorCast's arithmetic (docs/formats.md, "Codebooks").
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "castscope/cast.hpp"
#include "castscope/io.hpp"

using namespace castscope;

namespace {

const std::string kData = std::string(CASTSCOPE_SOURCE_DIR) + "/tests/codebook/data/";

nlohmann::json manifest() {
  std::ifstream in(kData + "manifest.json");
  EXPECT_TRUE(in.good()) << kData << "manifest.json";
  return nlohmann::json::parse(in);
}

const std::set<std::string> kKnownReasons = {
    "zeros-raise-exponent",         // exact zeros enter TensorCast's exponent as float32 eps
    "unclamped-exponent-scale",     // TensorCast does not clamp an exponent scale to its format
    "zero-float-scale",             // a float scale that is zero gives 0/0 = NaN in TensorCast
    "float-scale-double-rounding",  // amax / max rounded to float32 before the scale format
    "float32-quotient",             // x / scale rounded to float32 onto a midpoint
    "float32-norm",                 // mapping errors compared as float32 norms (over/underflow)
};

double scale_value(const CastResult& a, int64_t g) {
  const NumberSpec& s = a.dtype.scale()->scale;
  if (s.is_exponent())
    return std::ldexp(1.0, static_cast<int>(a.scale.ptr<uint8_t>()[g]) - s.bias());
  const uint32_t code =
      a.scale.dtype() == DType::U8 ? a.scale.ptr<uint8_t>()[g] : a.scale.ptr<uint16_t>()[g];
  return scalar::decode_value(code, s.format());
}

}  // namespace

TEST(CodebookReference, TablesMatchTensorCast) {
  const auto m = manifest();
  ASSERT_GE(m["tables"].size(), 5u);
  for (const auto& [spec, t] : m["tables"].items()) {
    const DataType d = DataType::parse(spec + "_e8m0_t32");
    ASSERT_EQ(d.family(), Family::Codebook) << spec;
    const Codebook& cb = *d.codebook();
    ASSERT_EQ(cb.maps.size(), t["maps"].size()) << spec;
    for (size_t i = 0; i < cb.maps.size(); ++i) {
      EXPECT_EQ(cb.names[i], t["names"][i].get<std::string>()) << spec << " mapping " << i;
      ASSERT_EQ(cb.maps[i].size(), t["maps"][i].size()) << spec;
      for (size_t j = 0; j < cb.maps[i].size(); ++j) {
        const double want = t["maps"][i][j].get<double>();
        EXPECT_EQ(cb.maps[i][j], want) << spec << " mapping " << i << " entry " << j;
        EXPECT_EQ(std::signbit(cb.maps[i][j]), std::signbit(want))
            << spec << " mapping " << i << " entry " << j;
      }
    }
  }
}

TEST(CodebookReference, CastsMatchTensorCastBitForBit) {
  const auto m = manifest();
  ASSERT_GE(m["cases"].size(), 5u);
  int compared = 0;
  for (const auto& c : m["cases"]) {
    const std::string name = c["name"];
    const DataType d = DataType::parse(c["dtype"].get<std::string>());
    ASSERT_EQ(d.family(), Family::Codebook) << name;
    const Tensor x = io::load_npy(kData + name + ".x.npy");
    const Tensor want = io::load_npy(kData + name + ".values.npy");
    const Tensor want_meta = io::load_npy(kData + name + ".meta.npy");
    const Tensor want_scale = io::load_npy(kData + name + ".scale.npy");
    const int tile = c["tile"];
    const std::set<int64_t> negzero = c["negative_zero_inputs"].get<std::set<int64_t>>();
    int negzero_checked = 0;
    std::set<int64_t> aside;
    for (const auto& a : c["set_aside"]) {
      EXPECT_TRUE(kKnownReasons.count(a["reason"].get<std::string>())) << name << " " << a;
      aside.insert(a["tile"].get<int64_t>());
    }
    // Set-asides are a minority: most tiles of every band are compared.
    EXPECT_LT(aside.size() * 3, static_cast<size_t>(x.numel() / tile)) << name;
    CastOptions o;
    o.device = Device::CPU;
    o.scale_mode = parse_scale_mode(c["scale_mode"].get<std::string>());
    const Tensor got = cast(x, d, o).values;
    o.mode = CastMode::Actual;
    const CastResult act = cast(x, d, o);
    const int sub = d.subtile() ? d.subtile()->sub : tile;
    ASSERT_EQ(act.meta.numel(), want_meta.numel()) << name;
    const float* gv = got.ptr<float>();
    const float* wv = want.ptr<float>();
    const float* xv = x.ptr<float>();
    for (int64_t t = 0; t < x.numel() / tile; ++t) {
      if (aside.count(t)) continue;
      ++compared;
      for (int64_t i = t * tile; i < (t + 1) * tile; ++i) {
        uint32_t a, b;
        std::memcpy(&a, gv + i, 4);
        std::memcpy(&b, wv + i, 4);
        if (negzero.count(i)) {
          // TensorCast: torch.sign(-0) is +0, so -0 comes back as +0; CastScope keeps -0.
          EXPECT_EQ(a, 0x80000000u) << name << " element " << i;
          EXPECT_EQ(b, 0u) << name << " element " << i;
          ++negzero_checked;
          continue;
        }
        ASSERT_EQ(a, b) << name << " tile " << t << " element " << i << " x=" << xv[i]
                        << " castscope=" << gv[i] << " tensorcast=" << wv[i];
      }
      for (int64_t s = t * tile / sub; s < (t + 1) * tile / sub; ++s)
        ASSERT_EQ(act.meta.ptr<uint8_t>()[s], want_meta.ptr<uint8_t>()[s])
            << name << " tile " << t << " subtile " << s;
      EXPECT_EQ(scale_value(act, t), want_scale.ptr<double>()[t]) << name << " tile " << t;
    }
    EXPECT_GT(negzero_checked, 0) << name;
  }
  EXPECT_GT(compared, 150);
}
