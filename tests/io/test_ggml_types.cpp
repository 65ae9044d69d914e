// Every ggml type that ggml's own Python package can dequantize, against its values: the blocks
// and gguf-py's `gguf.quants.dequantize` of them were written by tools/make_gguf_testdata.py
// into tests/data/ggml_types.gguf (random blocks from a recorded seed, stored in the file's
// key-values; float16 scales random finite, E8M0 / UE4M3 scale extremes included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "castscope/error.hpp"
#include "castscope/io.hpp"

using namespace castscope;

namespace {

std::string data_file() {
  return std::string(CASTSCOPE_SOURCE_DIR) + "/tests/data/ggml_types.gguf";
}

// The types gguf-py 0.19's gguf.quants dequantizes, plus the plain types GGUF stores.
const std::set<std::string> kExpected = {
    "Q4_0",  "Q4_1",   "Q5_0",    "Q5_1",   "Q8_0",    "Q2_K",  "Q3_K",   "Q4_K",
    "Q5_K",  "Q6_K",   "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
    "IQ2_S", "IQ4_XS", "IQ1_M",   "TQ1_0",  "TQ2_0",   "MXFP4", "NVFP4",  "F32",
    "F16",   "BF16",   "I8",      "I16",    "I32",     "I64",   "F64"};

}  // namespace

TEST(GgmlTypes, EveryDequantizableTypeMatchesGgufPyBitForBit) {
  auto m = io::open_model(data_file());
  std::set<std::string> seen;
  for (const io::TensorInfo& info : m->tensors()) {
    if (info.name.rfind("q.", 0) != 0 || info.name == "q.Q8_K") continue;
    const std::string type = info.name.substr(2);
    SCOPED_TRACE(type);
    EXPECT_EQ(info.dtype, type);
    const Tensor got = m->load(info.name), want = m->load("ref." + type);
    ASSERT_EQ(got.dtype(), DType::F32);
    ASSERT_EQ(got.shape(), want.shape());
    const float* g = got.ptr<float>();
    const float* w = want.ptr<float>();
    int64_t differ = 0, nonzero = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, g + i, 4);
      std::memcpy(&b, w + i, 4);
      if (a != b && differ++ < 5)
        ADD_FAILURE() << "element " << i << ": " << g[i] << " (0x" << std::hex << a << "), gguf-py "
                      << w[i] << " (0x" << b << ")" << std::dec;
      nonzero += w[i] != 0.0f;
    }
    EXPECT_EQ(differ, 0);
    EXPECT_GT(nonzero, got.numel() / 2) << "reference data is mostly zeros";
    seen.insert(type);
  }
  EXPECT_EQ(seen, kExpected);
}

TEST(GgmlTypes, UndecodableTypeIsListedAndItsLoadNamesTheType) {
  auto m = io::open_model(data_file());
  const io::TensorInfo* q8k = nullptr;
  for (const io::TensorInfo& info : m->tensors())
    if (info.name == "q.Q8_K") q8k = &info;
  ASSERT_NE(q8k, nullptr);
  EXPECT_EQ(q8k->dtype, "Q8_K");
  EXPECT_EQ(q8k->nbytes, 292u);
  try {
    m->load("q.Q8_K");
    FAIL() << "Q8_K loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Q8_K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q.Q8_K"), std::string::npos) << msg;
  }
}

TEST(GgmlTypes, PlainTypesLoadRawInTheirStoredDtype) {
  auto m = io::open_model(data_file());
  EXPECT_EQ(m->load_raw("q.I16").dtype(), DType::I16);
  EXPECT_EQ(m->load_raw("q.BF16").dtype(), DType::BF16);
  EXPECT_EQ(m->load_raw("q.F64").dtype(), DType::F64);
}
