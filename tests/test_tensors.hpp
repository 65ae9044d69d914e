// Random tensors and bit-for-bit comparison shared by the test areas that cast whole models.
#pragma once

#include <cstring>
#include <random>

#include "castscope/tensor.hpp"

namespace castscope::test {

// Normal values (mean 0, the given standard deviation) drawn from one seed: the same seed gives
// the same tensor in every test area.
inline Tensor normal(Shape s, uint64_t seed, double scale = 1.0) {
  Tensor t = Tensor::empty(DType::F32, s);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = static_cast<float>(nd(rng));
  return t;
}

// The same datatype, shape and bytes (NaN payloads included).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace castscope::test
