// Tensor storage: large tensors live in their own 2 MiB aligned mappings (engine/src/tensor.cpp);
// small ones on the heap. Both must be zero when made by empty() and hold what is written.
#include <gtest/gtest.h>

#include <cstdint>

#include "castscope/tensor.hpp"

namespace {

using namespace castscope;

TEST(TensorStorage, EmptyIsZeroAndKeepsWhatIsWritten) {
  // Below, at and above the 2 MiB threshold, and sizes that are not whole pages.
  for (int64_t n : {int64_t{1000}, int64_t{1} << 19, (int64_t{1} << 19) + 3, int64_t{5000001}}) {
    Tensor t = Tensor::empty(DType::F32, {n});
    const uint32_t* z = t.ptr<uint32_t>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) nonzero += z[i] != 0;
    EXPECT_EQ(nonzero, 0) << n;
    uint32_t* p = t.mutable_ptr<uint32_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(i * 2654435761u);
    Tensor u = Tensor::uninitialized(DType::U8, {n * 4 + 1});
    uint8_t* q = u.mutable_ptr<uint8_t>();
    for (int64_t i = 0; i < n * 4 + 1; ++i) q[i] = static_cast<uint8_t>(i);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += z[i] != static_cast<uint32_t>(i * 2654435761u);
    for (int64_t i = 0; i < n * 4 + 1; ++i) wrong += q[i] != static_cast<uint8_t>(i);
    EXPECT_EQ(wrong, 0) << n;
    if (n * 4 >= (int64_t{2} << 20))  // whole 2 MiB pieces can be huge pages
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % (uintptr_t{2} << 20), 0u) << n;
  }
}

}  // namespace
