// The model map with methods: one column per datatype x method, the method's cells the statistics
// of its values, every column's output error on the weight's calibration inputs, and a method
// that needs calibration refusing a weight without it in its cell.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "castscope/modelmap.hpp"
#include "test_seed.hpp"
#include "test_tensors.hpp"

namespace castscope {
namespace {

TEST(MapMethods, ColumnsPerDatatypeAndMethod) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Tensor w = test::normal({32, 256}, seed, 0.02);
  const std::string path = ::testing::TempDir() + "castscope_map_methods.npy";
  io::save_npy(path, w);
  auto model = io::open_model(path);
  ASSERT_EQ(model->tensors().size(), 1u);
  const std::string name = model->tensors()[0].name;
  // Correlated inputs: GPTQ has something to gain over round to nearest.
  Tensor x = test::normal({256, 256}, seed + 1);
  float* px = x.mutable_ptr<float>();
  for (int64_t t = 0; t < 256; ++t)
    for (int64_t c = 1; c < 256; ++c) px[t * 256 + c] += 0.8f * px[t * 256 + c - 1];

  MapOptions o;
  o.dtypes = {"uint4_float32_int8_t128"};
  MethodOptions rtn, gptq, mse;
  gptq.method = Method::GPTQ;
  mse.method = Method::MSE;
  o.methods = {rtn, gptq, mse};
  bool give = true;
  o.calib = [&](const std::string& n) { return give && n == name ? x : Tensor(); };
  const ModelMap m = sweep_model(*model, o);
  ASSERT_EQ(m.columns,
            (std::vector<std::string>{"uint4_float32_int8_t128", "uint4_float32_int8_t128@gptq",
                                      "uint4_float32_int8_t128@mse"}));
  ASSERT_EQ(m.rows.size(), 1u);
  const auto& cells = m.rows[0].cells;
  for (const MapCell& c : cells) {
    EXPECT_TRUE(c.error.empty()) << c.error;
    EXPECT_TRUE(c.has_calib);
  }
  const DataType d = DataType::parse(o.dtypes[0]);
  CastOptions a;
  a.mode = CastMode::Actual;
  const Tensor q = method_values(quantize(w, d, a, gptq, {x}, name));
  EXPECT_EQ(cells[1].stats.snr_db, compute_stats(w, q).snr_db);
  EXPECT_EQ(cells[1].calib_rel_err, calibration_rel_error(x, w, q, a));
  EXPECT_EQ(cells[0].stats.snr_db, compute_stats(w, cast(w, d).values).snr_db);
  EXPECT_LT(cells[1].calib_rel_err, cells[0].calib_rel_err);
  EXPECT_EQ(cells[2].stats.snr_db,
            compute_stats(w, method_values(quantize(w, d, a, mse, {}, name))).snr_db);

  give = false;
  const ModelMap none = sweep_model(*model, o);
  EXPECT_TRUE(none.rows[0].cells[0].error.empty());
  EXPECT_FALSE(none.rows[0].cells[0].has_calib);
  EXPECT_NE(none.rows[0].cells[1].error.find("needs calibration"), std::string::npos)
      << none.rows[0].cells[1].error;
  EXPECT_NE(none.rows[0].cells[1].error.find(name), std::string::npos);
}

}  // namespace
}  // namespace castscope
