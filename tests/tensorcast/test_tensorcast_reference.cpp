// CastScope against TensorCast itself: data/reference.npz holds inputs covering every difficult
// band and the outputs of TensorCast's own virtual cast (tools/tensorcast_reference.py says how
// they were made). Every element must agree bit for bit, except where TensorCast has one of the
// bugs documented in docs/formats.md ("TensorCast differences"); those are recognised here by a
// named rule from the input alone, counted, and reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/io.hpp"

namespace {

using namespace castscope;

struct Case {
  const char* name;   // member prefix in the .npz
  const char* dtype;  // CastScope datatype (TensorCast's name where it has one)
  const char* mode;   // scale mode (TensorCast "max" is floor)
};

const Case kCases[] = {
    {"mxfp8e4_midmax", "mxfp8e4", "midmax"},
    {"mxfp8e4_max", "mxfp8e4", "floor"},
    {"mxfp8e5_midmax", "mxfp8e5", "midmax"},
    {"mxfp6e3_midmax", "mxfp6e3", "midmax"},
    {"mxfp6e2_max", "mxfp6e2", "floor"},
    {"mxfp5e2_midmax", "mxfp5e2", "midmax"},
    {"mxfp4e2_max", "mxfp4e2", "floor"},
    {"mxfp4e2_midmax", "mxfp4e2", "midmax"},
    {"mxint8", "mxint8", "floor"},
    {"mxint4", "mxint4", "floor"},
    {"bfp16", "bfp16", "floor"},
    {"mx9", "mx9", "floor"},
    {"mx6", "mx6", "floor"},
    {"mx4", "mx4", "floor"},
    {"e2m1_e32s8o1_max", "e2m1_e32s8o1", "floor"},
    {"e2m1_e32s4o2_midmax", "e2m1_e32s4o2", "midmax"},
    {"e2m1_e32s8o2_midmax", "e2m1_e32s8o2", "midmax"},
    {"e4m3_f32", "e4m3_f32", "floor"},
    {"e2m1_f32", "e2m1_f32", "floor"},
    {"int4_f32", "int4_f32", "floor"},
    {"e2m1_e4m3_t16", "e2m1fnuz_e4m3fn_t16", "floor"},
    {"e4m3_e", "e4m3_e", "midmax"},
};

// TensorCast bugs, by name (docs/formats.md).
enum Bug {
  kZerosRaiseExponent,   // its frexp of an exact zero counts as 2^-23 in a shared exponent
  kUnclampedE8m0,        // it writes e8m0 exponents below code 0
  kZeroFloatScale,       // float data: it divides by a float scale that rounded to zero
  kIntegerNegativeZero,  // its virtual integers return -0.0, which no integer code holds
  kBugs
};
const char* kBugNames[kBugs] = {"zeros raise the shared exponent", "e8m0 below code 0",
                                "division by a zero float scale", "-0 from integer data"};

int floor_log2(double a) {
  int e;
  std::frexp(a, &e);
  return e - 1;
}

std::string path() {
  return std::string(CASTSCOPE_SOURCE_DIR) + "/tests/tensorcast/data/reference.npz";
}

TEST(TensorCastReference, BitForBit) {
  const auto model = io::open_model(path());
  int64_t total = 0, compared = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Tensor x = model->load(std::string(c.name) + ".x");
    const Tensor y = model->load(std::string(c.name) + ".y");
    ASSERT_EQ(x.shape(), y.shape());
    ASSERT_EQ(x.shape().size(), 2u);
    const DataType d = DataType::parse(c.dtype);
    CastOptions o;
    o.device = Device::CPU;
    o.scale_mode = parse_scale_mode(c.mode);
    const Tensor out = cast(x, d, o).values;
    const int64_t rows = x.shape()[0], width = x.shape()[1];
    const auto& sc = *d.scale();
    const bool tensor_scope = sc.tiles.empty();
    const int64_t tile = tensor_scope ? rows * width : sc.tiles.back().size;
    const NumberSpec& n = d.number();
    const bool exp_scale = sc.scale.is_exponent();
    const double data_max = n.is_int() ? static_cast<double>(n.int_max()) : n.max();
    const float* px = x.ptr<float>();
    const float* py = y.ptr<float>();
    const float* po = out.ptr<float>();
    int64_t bugs[kBugs] = {};
    int64_t mismatched = 0;
    const int64_t groups = tensor_scope ? 1 : rows * (width / tile);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t b = g * tile, e = b + tile;
      double a = 0;
      bool zero = false;
      for (int64_t i = b; i < e; ++i) {
        a = std::max(a, std::fabs(static_cast<double>(px[i])));
        zero |= px[i] == 0;
      }
      // Tile-level rules: which TensorCast bug, if any, decides this tile's scale.
      int tile_bug = -1;
      // A zero counts as 2^-23 in TensorCast: it moves a tile exponent below -23, and a subtile
      // offset wherever the tile's exponent is within 3 (the largest offset) of -23.
      if (exp_scale && zero && a > 0 && floor_log2(a) < -23 + 3) tile_bug = kZerosRaiseExponent;
      if (exp_scale && a > 0 && floor_log2(a) + 1 - n.emax() + sc.scale.bias() <= 0)
        tile_bug = kUnclampedE8m0;
      if (!exp_scale && n.is_float() && a / data_max <= sc.scale.min_subnormal() / 2)
        tile_bug = kZeroFloatScale;  // all-zero tiles included: 0 / 0
      for (int64_t i = b; i < e; ++i) {
        uint32_t bo, by;
        std::memcpy(&bo, po + i, 4);
        std::memcpy(&by, py + i, 4);
        ++total;
        if (tile_bug >= 0) {
          ++bugs[tile_bug];
          continue;
        }
        if ((n.is_int() || n.is_uint()) && py[i] == 0 && std::signbit(py[i]) && bo == 0) {
          ++bugs[kIntegerNegativeZero];
          continue;
        }
        ++compared;
        if (bo != by) {
          if (++mismatched <= 5)
            ADD_FAILURE() << c.dtype << " " << c.mode << ": element " << i << " (row " << i / width
                          << ") x=" << px[i] << " castscope=" << po[i] << " tensorcast=" << py[i];
        }
      }
    }
    EXPECT_EQ(mismatched, 0) << c.name;
    std::string aside;
    for (int k = 0; k < kBugs; ++k)
      if (bugs[k]) aside += std::string(" ") + kBugNames[k] + ": " + std::to_string(bugs[k]) + ";";
    if (!aside.empty()) std::printf("%-22s set aside:%s\n", c.name, aside.c_str());
  }
  // Nearly everything is compared: the rules set aside only the bands built to show the bugs.
  EXPECT_GT(compared, total * 9 / 10);
  std::printf("compared %lld of %lld elements bit for bit\n", static_cast<long long>(compared),
              static_cast<long long>(total));
}

}  // namespace
