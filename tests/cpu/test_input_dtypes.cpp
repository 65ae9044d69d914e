// Input dtypes: bfloat16, float16 and float64 tensors whose values float32 holds exactly cast
// exactly like their float32 conversion, for every registry datatype; the tile axis, thread
// count and rank do not change the bits.
#include "helpers.hpp"

using namespace cputest;

namespace {

Shape shape_for(const DataType& d) {
  if (d.scaled() && d.scale()->tiles.size() == 2) return {130, 260};
  return {6, 130};
}

TEST(InputDtypes, ExactConversionsCastAlike) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    const Shape shape = shape_for(d);
    const int64_t n = numel(shape);
    std::vector<float> xv = mixed(n, rng);
    Tensor bf = Tensor::empty(DType::BF16, shape), hf = Tensor::empty(DType::F16, shape),
           df = Tensor::empty(DType::F64, shape);
    for (int64_t i = 0; i < n; ++i) {
      bf.mutable_ptr<uint16_t>()[i] = float_to_bf16(xv[i]);
      hf.mutable_ptr<uint16_t>()[i] = float_to_half(xv[i]);
      df.mutable_ptr<double>()[i] = xv[i];
    }
    for (const Tensor* t : {&bf, &hf, &df}) {
      const Tensor as32 = t->to_f32();
      const Tensor a = cast(*t, d, cpu_opts()).values;
      const Tensor b = cast(as32, d, cpu_opts()).values;
      ASSERT_EQ(a.dtype(), DType::F32);
      const int64_t k = first_diff(a, b);
      EXPECT_EQ(k, -1) << e.name << " input " << dtype_name(t->dtype()) << " seed=" << seed
                       << " at " << k << " x=" << to_vec(as32)[std::max<int64_t>(k, 0)];
    }
  }
}

TEST(InputDtypes, ThreadsAndRankDoNotMatter) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (const RegistryEntry& e : registry()) {
    const DataType d = DataType::parse(e.name);
    const Shape shape = shape_for(d);
    const Tensor x = f32(mixed(numel(shape), rng), shape);
    CastOptions o1 = cpu_opts(), o2 = cpu_opts();
    o1.threads = 1;
    o2.threads = 2;
    const Tensor a = cast(x, d, o1).values, b = cast(x, d, o2).values;
    EXPECT_EQ(first_diff(a, b), -1) << e.name << " threads 1 vs 2, seed=" << seed;
    if (d.scaled() && d.scale()->tiles.size() == 2) continue;
    // A leading axis of 1 and a split leading axis are the same rows.
    Shape s3 = {2, shape[0] / 2, shape[1]};
    const Tensor c = cast(x.reshaped(s3), d, cpu_opts()).values;
    EXPECT_EQ(first_diff(a, c), -1) << e.name << " rank 3 vs rank 2, seed=" << seed;
  }
}

}  // namespace
