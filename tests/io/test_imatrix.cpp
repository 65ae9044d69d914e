// llama-imatrix's importance matrices: GGUF and legacy .dat read back what was written, the
// weights llama-quantize derives (sums / count per set, 1 for a set never seen, legacy
// sums / ncall), their fit to a tensor's shape, hostile files, and the weights' place in ggml's
// quantizers (ignored by Q8_0, one set per expert, refused when they fit no row). Byte identity
// with llama.cpp itself is tests/interop/test_ggml_imatrix.py and test_imatrix_llama.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/error.hpp"
#include "castscope/imatrix.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& f) {
  return (fs::temp_directory_path() / ("castscope_imx_" + std::to_string(::getpid()) + "_" + f))
      .string();
}

io::Imatrix random_imatrix(std::mt19937_64& rng) {
  io::Imatrix m;
  m.datasets = {"calibration.txt"};
  m.chunk_count = 7;
  m.chunk_size = 128;
  std::exponential_distribution<float> e(1.0f);
  auto entry = [&](int sets, int n, std::vector<int64_t> counts) {
    io::ImatrixEntry x;
    for (int i = 0; i < sets * n; ++i) x.sums.push_back(e(rng) * 100);
    x.counts = std::move(counts);
    return x;
  };
  m.entries["blk.0.attn_q.weight"] = entry(1, 64, {896});
  m.entries["blk.0.ffn_down_exps.weight"] = entry(3, 32, {500, 0, 12});
  m.entries["output.weight"] = entry(1, 64, {896});
  return m;
}

Tensor random_tensor(Shape s, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::F32, s);
  std::student_t_distribution<float> d(4);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = 0.02f * d(rng);
  return t;
}

std::vector<uint8_t> codes(const Tensor& x, const char* dtype,
                           std::shared_ptr<const std::vector<float>> w) {
  CastOptions o;
  o.mode = CastMode::Actual;
  o.device = Device::CPU;
  o.importance = std::move(w);
  const CastResult r = cast(x, DataType::parse(dtype), o);
  const auto* p = static_cast<const uint8_t*>(r.codes.data());
  return {p, p + r.codes.nbytes()};
}

}  // namespace

TEST(Imatrix, GgufAndLegacyReadBackWhatWasWritten) {
  std::mt19937_64 rng(castscope::test::test_seed());
  const io::Imatrix m = random_imatrix(rng);
  const std::string g = tmp("m.gguf"), d = tmp("m.dat");
  io::write_imatrix(g, m, false);
  const io::Imatrix r = io::read_imatrix(g);
  EXPECT_FALSE(r.legacy);
  EXPECT_TRUE(r.has_metadata);
  EXPECT_EQ(r.datasets, m.datasets);
  EXPECT_EQ(r.chunk_count, 7);
  EXPECT_EQ(r.chunk_size, 128);
  ASSERT_EQ(r.entries.size(), 3u);
  for (const auto& [name, e] : m.entries) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r.entries.at(name).sums, e.sums);
    EXPECT_EQ(r.entries.at(name).counts, e.counts);
  }
  // The weights: sums / count per set; the expert never seen weighs 1.
  const std::vector<float> w = r.weights("blk.0.ffn_down_exps.weight");
  const auto& e = m.entries.at("blk.0.ffn_down_exps.weight");
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(w[i], e.sums[i] / 500.0f);
    EXPECT_EQ(w[32 + i], 1.0f);
    EXPECT_EQ(w[64 + i], e.sums[64 + i] / 12.0f);
  }
  // As .dat: llama-imatrix's legacy values, (sum / count) * ncall with ncall = ceil(max count /
  // chunk size), and the same file written again from what was read.
  io::write_imatrix(d, r, true);
  const io::Imatrix l = io::read_imatrix(d);
  EXPECT_TRUE(l.legacy);
  EXPECT_EQ(l.chunk_count, 7);
  EXPECT_EQ(l.datasets, m.datasets);
  const auto& q = l.entries.at("blk.0.attn_q.weight");
  ASSERT_EQ(q.counts, std::vector<int64_t>{7});  // ceil(896 / 128)
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(q.sums[i], (m.entries.at("blk.0.attn_q.weight").sums[i] / 896.0f) * 7.0f);
  EXPECT_EQ(l.weights("blk.0.attn_q.weight")[3], q.sums[3] / 7);
  const std::string d2 = tmp("m2.dat");
  io::write_imatrix(d2, l, true);
  std::ifstream a(d, std::ios::binary), b(d2, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}),
            std::string(std::istreambuf_iterator<char>(b), {}));
  for (const auto& f : {g, d, d2}) fs::remove(f);
}

TEST(Imatrix, WeightsFitTheTensorAsLlamaQuantizeChecksThem) {
  std::mt19937_64 rng(castscope::test::test_seed() + 1);
  const io::Imatrix m = random_imatrix(rng);
  EXPECT_EQ(m.weights_for("blk.0.attn_q.weight", {16, 64})->size(), 64u);
  EXPECT_EQ(m.weights_for("blk.0.ffn_down_exps.weight", {3, 8, 32})->size(), 96u);
  EXPECT_EQ(m.weights_for("blk.1.attn_q.weight", {16, 64}), nullptr);  // no entry
  try {
    m.weights_for("output.weight", {16, 128});
    ADD_FAILURE() << "a mismatching entry was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output.weight"), std::string::npos) << e.what();
  }
}

TEST(Imatrix, HostileFilesAreErrorsNamingTheFile) {
  std::mt19937_64 rng(castscope::test::test_seed() + 2);
  const io::Imatrix m = random_imatrix(rng);
  const std::string d = tmp("h.dat"), t = tmp("t.dat");
  io::write_imatrix(d, m, true);
  std::ifstream in(d, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  for (const size_t cut : {size_t{2}, size_t{10}, bytes.size() / 2}) {
    std::ofstream(t, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      io::read_imatrix(t);
      ADD_FAILURE() << "a file cut at " << cut << " bytes was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(t), std::string::npos) << e.what();
    }
  }
  io::Imatrix bad = m;
  bad.entries["blk.0.attn_q.weight"].sums[5] = std::nanf("");
  io::write_imatrix(t, bad, false);
  try {
    io::read_imatrix(t);
    ADD_FAILURE() << "a NaN importance was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
  }
  fs::remove(d);
  fs::remove(t);
}

// Q8_0 ignores the weights (as ggml's quantize_q8_0 does); the K-quants' and IQ4's weighted
// quantizers lower the weighted error on heavy-tailed weights; stacked experts take one set each.
TEST(Imatrix, QuantizersUseTheWeightsAsGgmlDoes) {
  const uint64_t seed = castscope::test::test_seed() + 3;
  std::mt19937_64 rng(seed);
  const Tensor x = random_tensor({64, 512}, rng);
  std::lognormal_distribution<float> ln(0.0f, 2.0f);
  auto w = std::make_shared<std::vector<float>>(512);
  for (float& v : *w) v = ln(rng);
  EXPECT_EQ(codes(x, "q8_0", w), codes(x, "q8_0", nullptr));
  for (const char* dt : {"q4_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"}) {
    SCOPED_TRACE(dt);
    double err[2];
    for (int k = 0; k < 2; ++k) {
      CastOptions o;
      o.device = Device::CPU;
      if (k) o.importance = w;
      const Tensor v = cast(x, DataType::parse(dt), o).values;
      double s = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double d = x.ptr<float>()[i] - v.ptr<float>()[i];
        s += (*w)[static_cast<size_t>(i % 512)] * d * d;
      }
      err[k] = s;
    }
    EXPECT_LT(err[1], err[0]) << "seed " << seed;
  }
  // Experts: [2, 4, 256] with two sets equals each expert cast with its own.
  const Tensor e = random_tensor({2, 4, 256}, rng);
  auto w2 = std::make_shared<std::vector<float>>(512);
  for (float& v : *w2) v = ln(rng);
  const std::vector<uint8_t> both = codes(e, "q4_k", w2);
  for (int k = 0; k < 2; ++k) {
    Tensor part = Tensor::empty(DType::F32, {4, 256});
    std::memcpy(part.mutable_ptr<float>(), e.ptr<float>() + k * 1024, 1024 * 4);
    auto wk =
        std::make_shared<std::vector<float>>(w2->begin() + k * 256, w2->begin() + (k + 1) * 256);
    const std::vector<uint8_t> one = codes(part, "q4_k", wk);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), both.begin() + k * one.size())) << k;
  }
  // Weights that fit no row are refused.
  EXPECT_THROW(codes(x, "q4_k", std::make_shared<std::vector<float>>(300, 1.0f)), Error);
}
