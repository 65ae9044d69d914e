// Shared helpers of the CPU engine tests: tensors from vectors, seeded inputs, bit comparison.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "castscope/cast.hpp"
#include "test_seed.hpp"

namespace cputest {

using namespace castscope;

inline uint64_t fresh_seed() {
  return castscope::test::test_seed();
}

inline Tensor f32(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::memcpy(t.mutable_data(), v.data(), v.size() * sizeof(float));
  return t;
}

inline std::vector<float> to_vec(const Tensor& t) {
  const Tensor f = t.dtype() == DType::F32 ? t : t.to_f32();
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.numel());
}

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bits(a) == bits(b);
}

// Index of the first element where two float tensors differ in bits (NaN == NaN), or -1.
inline int64_t first_diff(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return 0;
  const std::vector<float> va = to_vec(a), vb = to_vec(b);
  for (size_t i = 0; i < va.size(); ++i)
    if (!same(va[i], vb[i])) return static_cast<int64_t>(i);
  return -1;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (static_cast<bool>(a) != static_cast<bool>(b)) return false;
  if (!a) return true;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Normal values spread over many binades, with zeros, ties and a few huge / tiny ones.
inline std::vector<float> mixed(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int k = pick(rng);
    if (k < 3)
      x = 0.0f;
    else if (k < 5)
      x = -0.0f;
    else if (k < 8)
      x = std::ldexp(1.0f + (k % 4) / 4.0f, -(k % 9) - 130);  // subnormal
    else if (k < 10)
      x = std::ldexp(-1.5f, 100 + k);
    else
      x = normal(rng) * std::ldexp(1.0f, pick(rng) % 13 - 6);
  }
  return v;
}

inline CastOptions cpu_opts(CastMode mode = CastMode::Virtual) {
  CastOptions o;
  o.device = Device::CPU;
  o.mode = mode;
  return o;
}

}  // namespace cputest
