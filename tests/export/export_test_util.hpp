// What the export tests share: the run's seed, random weights with a spread of magnitudes and a
// scratch folder.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "castscope/tensor.hpp"
#include "test_seed.hpp"

namespace exporttest {

inline uint64_t fresh_seed() {
  return castscope::test::test_seed();
}

// N(0, 1) times 2^U(-emax, emax), so that tiles get different scales; with zero_one_in > 0,
// about one value in zero_one_in is an exact zero.
inline castscope::Tensor spread_tensor(const castscope::Shape& shape, std::mt19937_64& rng,
                                       int emax, int zero_one_in = 0) {
  castscope::Tensor t = castscope::Tensor::empty(castscope::DType::F32, shape);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-emax, emax), z(0, std::max(zero_one_in - 1, 0));
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = zero_one_in > 0 && z(rng) == 0 ? 0.0f : std::ldexp(n(rng), e(rng));
  return t;
}

// A fresh folder under the system's temporary one (named by the prefix, the process and a
// random number), removed with its contents.
struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const std::string& prefix)
      : dir(std::filesystem::temp_directory_path() /
            (prefix + std::to_string(::getpid()) + "_" + std::to_string(fresh_seed() % 1000000))) {
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() { std::filesystem::remove_all(dir); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

}  // namespace exporttest
