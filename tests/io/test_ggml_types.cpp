// Every ggml type that ggml's own Python package can dequantize, against its values: the blocks
// and gguf-py's `gguf.quants.dequantize` of them were written by tools/make_gguf_testdata.py
// into tests/data/ggml_types.gguf (random blocks from a recorded seed, stored in the file's
// key-values; float16 scales random finite, E8M0 / UE4M3 scale extremes included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/error.hpp"
#include "castscope/io.hpp"
#include "io_test_util.hpp"

using namespace castscope;
using namespace castscope::iotest;

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

// The ggml datatypes cast as llama.cpp's model quantizer does: actual-mode codes are exactly the
// blocks gguf-py's quantize writes (the K-quants, IQ4 and MXFP4: ggml's C quantizers, which the
// data generator compiles; IQ4_NL's quantize_iq4_nl), and virtual values exactly gguf-py's
// dequantize of them.
TEST(GgmlTypes, CastsMatchGgufPyQuantizeBitForBit) {
  auto m = io::open_model(data_file());
  const Tensor src_py = m->load("src"), src_c = m->load("src_c");
  int checked = 0;
  for (const char* name : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k",
                           "q6_k", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4_ggml"}) {
    SCOPED_TRACE(name);
    const DataType d = DataType::parse(name);
    ASSERT_EQ(d.family(), Family::GGML);
    std::string upper;  // the GGUF type: the name in capitals, but for mxfp4_ggml
    for (const char* c = name; *c; ++c) upper += static_cast<char>(std::toupper(*c));
    if (upper == "MXFP4_GGML") upper = "MXFP4";
    const io::TensorInfo* info = nullptr;
    for (const io::TensorInfo& i : m->tensors())
      if (i.name == "quant." + upper) info = &i;
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, upper);
    // The K-quants and IQ4 come from ggml's C code on rows without subnormal blocks (it asserts
    // on them), MXFP4 from ggml's C code on all rows.
    const bool c_ref = std::string(name).find('k') != std::string::npos || name[0] == 'i';
    const Tensor& src = c_ref ? src_c : src_py;
    CastOptions o;
    o.device = Device::CPU;
    o.mode = CastMode::Actual;
    const CastResult act = cast(src, d, o);
    ASSERT_EQ(act.codes.nbytes(), info->nbytes);
    // The stored blocks, read straight from the file (the reader gives values, not bytes).
    std::ifstream f(info->file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)),
                                  std::istreambuf_iterator<char>());
    const std::vector<uint8_t> file(bytes.begin(), bytes.end());
    const std::vector<uint8_t> got(act.codes.ptr<uint8_t>(),
                                   act.codes.ptr<uint8_t>() + act.codes.nbytes());
    const auto at = std::search(file.begin(), file.end(), got.begin(), got.end());
    EXPECT_TRUE(at != file.end()) << "the codes are not gguf-py's blocks";
    o.mode = CastMode::Virtual;
    const Tensor virt = cast(src, d, o).values, want = m->load("quant." + upper);
    ASSERT_EQ(virt.shape(), want.shape());
    EXPECT_EQ(std::memcmp(virt.data(), want.data(), want.nbytes()), 0);
    EXPECT_EQ(std::memcmp(upcast(act).data(), want.data(), want.nbytes()), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

// Rows that do not fill whole blocks are padded; non-finite values make their block NaN.
TEST(GgmlTypes, PartialBlocksAndNonFiniteValues) {
  std::vector<float> v(2 * 40);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  v[5] = INFINITY;
  Tensor x = Tensor::empty(DType::F32, {2, 40});
  std::memcpy(x.mutable_data(), v.data(), v.size() * 4);
  CastOptions o;
  o.mode = CastMode::Actual;
  const CastResult act = cast(x, DataType::parse("q4_0"), o);
  EXPECT_EQ(act.codes.shape(), (Shape{2, 2 * 18}));
  const Tensor up = upcast(act);
  const float* u = up.ptr<float>();
  for (int j = 0; j < 32; ++j) EXPECT_TRUE(std::isnan(u[j])) << j;
  for (int j = 32; j < 80; ++j) {
    EXPECT_TRUE(std::isfinite(u[j])) << j;
    EXPECT_LE(std::fabs(u[j] - v[j]), 3.0f / 8) << j;  // within one step of d = max / 8
  }
  EXPECT_EQ(act.counts.nonfinite, 1);
  // ggml runs blocks along rows only: another axis is refused by name, actual and virtual
  // alike (no runtime holds a cast across the rows, so none is computed).
  CastOptions a0;
  a0.axis = 0;
  for (CastMode mode : {CastMode::Actual, CastMode::Virtual}) {
    a0.mode = mode;
    try {
      cast(x, DataType::parse("q4_0"), a0);
      ADD_FAILURE() << "q4_0 cast along axis 0";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("q4_0 quantizes blocks along the last axis"),
                std::string::npos)
          << e.what();
    }
  }
}

namespace {

// The GGUF blocks of an actual cast of one row.
std::vector<uint8_t> blocks_of(const std::vector<float>& v, const char* dtype) {
  Tensor x = Tensor::empty(DType::F32, {static_cast<int64_t>(v.size())});
  std::memcpy(x.mutable_data(), v.data(), v.size() * 4);
  CastOptions o;
  o.mode = CastMode::Actual;
  const CastResult r = cast(x, DataType::parse(dtype), o);
  return {r.codes.ptr<uint8_t>(), r.codes.ptr<uint8_t>() + r.codes.nbytes()};
}

}  // namespace

// mxfp4_ggml is ggml's MXFP4 quantizer where it differs from OCP's (mxfp4e2): a value that rounds
// to zero is +0 whatever its sign, an exact tie goes to the smaller magnitude, and the exponent
// is floorf(log2f(amax)) in float32, one more than OCP's just below a power of two.
TEST(GgmlTypes, Mxfp4GgmlRoundsAsLlamaCppAndOcpDoesNot) {
  // amax 6: e = 2 - 2 + 127, elements in units of 2^(e-127) = 1: {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
  std::vector<float> v(32, 0.0f);
  v[0] = 6.0f;
  v[1] = -0.1f;   // rounds to zero: ggml +0 (0x0), OCP -0 (0x8)
  v[2] = 0.75f;   // tie of 0.5 and 1: ggml 0.5 (0x1), OCP to even 1 (0x2)
  v[3] = -1.75f;  // tie of 1.5 and 2: ggml -1.5 (0xB), OCP -2 (0xC)
  v[4] = 2.5f;    // tie of 2 and 3: both 2 (0x4), the even one being the smaller
  v[17] = 5.0f;   // tie of 4 and 6: both 4 (0x6)
  const std::vector<uint8_t> g = blocks_of(v, "mxfp4_ggml");
  ASSERT_EQ(g.size(), 17u);
  EXPECT_EQ(g[0], 127);
  EXPECT_EQ(g[1], 0x07);  // element 0 (code 0x7, 6) and element 16 (0)
  EXPECT_EQ(g[2] & 0xF, 0x0);
  EXPECT_EQ(g[3] & 0xF, 0x1);
  EXPECT_EQ(g[4] & 0xF, 0xB);
  EXPECT_EQ(g[5] & 0xF, 0x4);
  EXPECT_EQ(g[2] >> 4, 0x6);
  CastOptions o;
  o.mode = CastMode::Actual;
  Tensor x = Tensor::empty(DType::F32, {32});
  std::memcpy(x.mutable_data(), v.data(), 128);
  const CastResult ocp = cast(x, DataType::parse("mxfp4e2"), o);
  const uint8_t* c = ocp.codes.ptr<uint8_t>();  // one OCP code per element
  EXPECT_EQ(ocp.scale.ptr<uint8_t>()[0], 127);
  EXPECT_EQ(c[1], 0x8);
  EXPECT_EQ(c[2], 0x2);
  EXPECT_EQ(c[3], 0xC);
  EXPECT_EQ(c[4], 0x4);
  EXPECT_EQ(c[17], 0x6);

  // amax just below 8: log2f rounds up to 3, so ggml's e is 128 where OCP's floor gives 127.
  std::vector<float> w(32, 1.0f);
  w[7] = std::nextafter(8.0f, 0.0f);
  EXPECT_EQ(blocks_of(w, "mxfp4_ggml")[0], 128);
  Tensor y = Tensor::empty(DType::F32, {32});
  std::memcpy(y.mutable_data(), w.data(), 128);
  EXPECT_EQ(cast(y, DataType::parse("mxfp4e2"), o).scale.ptr<uint8_t>()[0], 127);

  // An all-zero block: e = 0 and +0 codes. A non-finite block: E8M0's NaN (0xFF), zero codes.
  const std::vector<uint8_t> z = blocks_of(std::vector<float>(32, 0.0f), "mxfp4_ggml");
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](uint8_t b) { return b == 0; }));
  std::vector<float> n(32, 1.0f);
  n[9] = NAN;
  const std::vector<uint8_t> nb = blocks_of(n, "mxfp4_ggml");
  EXPECT_EQ(nb[0], 0xFF);
  EXPECT_TRUE(std::all_of(nb.begin() + 1, nb.end(), [](uint8_t b) { return b == 0; }));
}

// iq4_nl is ggml's quantize_iq4_nl: it tries 15 scales around max / -127 and picks the codes again
// for the best, so its blocks have no larger weighted error than one scale gives; an all-zero
// block has scale 0 and code 8 (the table's 1) throughout, whatever came before it.
TEST(GgmlTypes, Iq4NlSearchesScalesAndZeroBlocksStandAlone) {
  std::vector<float> v(64, 0.0f);
  for (int j = 0; j < 32; ++j) v[j] = std::sin(0.71f * static_cast<float>(j)) * 2.0f;
  const std::vector<uint8_t> b = blocks_of(v, "iq4_nl");
  ASSERT_EQ(b.size(), 36u);
  EXPECT_EQ(b[18], 0);
  EXPECT_EQ(b[19], 0);
  for (int j = 20; j < 36; ++j) EXPECT_EQ(b[j], 0x88) << j;
  // Weighted (x^2) squared error of the stored block against the one-scale fit at max / -127.
  static const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};
  uint16_t h;
  std::memcpy(&h, b.data(), 2);
  const float d = half_to_float(h);
  double err = 0, err1 = 0;
  float amax = 0, mx = 0;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(v[j]) > amax) amax = std::fabs(v[j]), mx = v[j];
  const float d1 = mx / -127.0f;
  for (int j = 0; j < 32; ++j) {
    const int q = j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4;
    int best = 0;
    for (int k = 1; k < 16; ++k)
      if (std::fabs(kv[k] * d1 - v[j]) < std::fabs(kv[best] * d1 - v[j])) best = k;
    err += static_cast<double>(v[j]) * v[j] * std::pow(kv[q] * d - v[j], 2);
    err1 += static_cast<double>(v[j]) * v[j] * std::pow(kv[best] * d1 - v[j], 2);
  }
  EXPECT_LT(err, err1);
}

// `report` and the plan treat decodable GGUF block types as float tensors.
TEST(GgmlTypes, BlockTypesCountAsFloatStorage) {
  for (const char* t : {"Q4_1", "Q4_K", "Q6_K", "IQ2_XXS", "IQ4_NL", "TQ1_0", "NVFP4"})
    EXPECT_TRUE(io::is_float_storage(t)) << t;
  for (const char* t : {"Q8_K", "I32", "ggml_type_99"}) EXPECT_FALSE(io::is_float_storage(t)) << t;
}

// Block types check their rows and data like the others; the errors name the type.
TEST(GgmlTypes, HostileBlockHeadersAreErrorsNamingTheType) {
  TempDir dir;
  struct Case {
    const char* what;
    GgufTensor t;
    const char* needle;
  };
  const Case cases[] = {
      {"Q4_K row of 128",
       {"t", 12, {128}, Bytes(144, 0)},
       "Q4_K needs rows that are a multiple of 256"},
      {"IQ2_XS data past the end", {"t", 17, {256, 4}, Bytes(74, 0)}, "runs past the end"},
      {"NVFP4 row of 32",
       {"t", 40, {32}, Bytes(36, 0)},
       "NVFP4 needs rows that are a multiple of 64"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write_file(dir / "h.gguf", gguf_bytes({c.t}));
    try {
      io::open_model(dir / "h.gguf");
      ADD_FAILURE() << "opened";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}
