// Codebook casts on the GPU against the CPU engine, bit for bit: implicit and generic codebooks,
// subtiles, float and exponent scales, scale modes, axes, short last tiles and float64 input.
#include "gpu_test_util.hpp"

#include <fstream>

#include "castscope/datatype.hpp"

namespace castscope::gputest {
namespace {

TEST(GpuCodebook, MatchesTheCpuBitForBit) {
  CS_REQUIRE_GPU();
  const uint64_t seed = run_seed();
  const std::string table = std::string(CASTSCOPE_BINARY_DIR) + "/gpu_cb_table.json";
  std::ofstream(table) << R"({"codebook": "cb22_e2m3fnuz_gputest", "mappings": [
      [-6,-2,-0.0,0,2,6], [-7.5,-1,-0.0,0,1,7.5], [-4,-3,-0.0,0,3,4], [-0.5,-0.25,-0.0,0,0.25,0.5]]})";
  // The table above has 6 entries, not 2^2 = 4: loading it must fail and name the field.
  EXPECT_THROW(load_codebook_file(table), Error);
  std::ofstream(table) << R"({"codebook": "cb22_e2m3fnuz_gputest", "mappings": [
      [-6,-0.0,0,6], [-7.5,-0.0,0,7.5], [-3,-0.0,0,3], [-0.5,-0.0,0,0.5]]})";
  load_codebook_file(table);
  const char* dtypes[] = {"icb44fi4_e32s8",
                          "icb44fi3_f32s4",
                          "icb44fi2_f32",
                          "icb42p1s2_e4m3fn_e8m0_t64s16",
                          "icb41ie_e2m3fnuz_e8m0_t16s2",
                          "icb44fi_e5m2_float16_t32s8",
                          "cb22_e2m3fnuz_gputest_e8m0_t32s4"};
  uint64_t k = 0;
  int casts = 0;
  for (const char* name : dtypes) {
    const DataType d = DataType::parse(name);
    for (ScaleMode sm : {ScaleMode::Floor, ScaleMode::Midmax, ScaleMode::Ceil})
      for (int axis : {-1, 0})
        for (CastMode m : {CastMode::Virtual, CastMode::Actual, CastMode::Compress}) {
          const Shape shape = axis == -1 ? Shape{37, 200} : Shape{200, 3, 5};
          Tensor x = random_input(shape, seed + ++k, 448.0, 464.0);
          if (k % 3 == 0) {
            Tensor xd = Tensor::empty(DType::F64, shape);
            for (int64_t i = 0; i < x.numel(); ++i) xd.mutable_ptr<double>()[i] = x.ptr<float>()[i];
            x = xd;
          }
          CastOptions o;
          o.mode = m;
          o.axis = axis;
          o.scale_mode = sm;
          const CastResult c = cpu_cast(x, d, o);
          const CastResult g = cuda::cast(x, d, o);
          ASSERT_EQ(g.backend, "cuda") << name;
          ASSERT_EQ(result_diff(c, g), "")
              << name << " " << to_string(sm) << " axis " << axis << " " << to_string(m) << " seed "
              << seed << " input " << seed + k;
          ++casts;
        }
  }
  EXPECT_EQ(casts, 7 * 3 * 2 * 3);
}

}  // namespace
}  // namespace castscope::gputest
