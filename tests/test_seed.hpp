// The seed of a test's random inputs, for every test area: CASTSCOPE_TEST_SEED when set (CI sets
// it from the commit, so a commit always meets the same inputs; set it by hand to replay a
// failure), otherwise fresh. Tests print the seed with every failure.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace castscope::test {

inline uint64_t test_seed() {
  if (const char* e = std::getenv("CASTSCOPE_TEST_SEED")) return std::strtoull(e, nullptr, 10);
  return static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
}

}  // namespace castscope::test
