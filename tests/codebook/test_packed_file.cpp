// Codebook casts in CastScope packed safetensors files: written, read back and decoded to the
// virtual cast's bits; a generic codebook's tables travel inside the file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/cast.hpp"
#include "castscope/io.hpp"

using namespace castscope;

namespace {

Tensor input(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  Tensor t = Tensor::empty(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = nd(rng);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST(CodebookPackedFile, RoundTripsEveryPartAndDecodesBitExact) {
  const std::string table = std::string(CASTSCOPE_BINARY_DIR) + "/cb_packed_table.json";
  std::ofstream(table) << R"({"codebook": "cb31_e3m2fnuz_pk", "mappings": [
      [-28,-16,-8,-0.0,0,8,16,28], [-12,-6,-3,-0.0,0,3,6,12]], "names": ["wide", "narrow"]})";
  load_codebook_file(table);
  const uint64_t seed = 424242;
  const std::string path = std::string(CASTSCOPE_BINARY_DIR) + "/cb_packed.safetensors";
  std::vector<io::PackedTensor> out;
  std::vector<Tensor> virt;
  const char* dtypes[] = {"icb44fi4_e32s8", "icb44fi2_f32s4", "cb31_e3m2fnuz_pk_e8m0_t16s4"};
  int k = 0;
  for (const char* name : dtypes) {
    const Shape s = k == 1 ? Shape{3, 64, 5} : Shape{10, 48};
    CastOptions o;
    o.device = Device::CPU;
    o.axis = k == 1 ? 1 : -1;
    const Tensor x = input(s, seed + k);
    virt.push_back(cast(x, DataType::parse(name), o).values);
    o.mode = CastMode::Compress;
    out.push_back({"w" + std::to_string(k), cast(x, DataType::parse(name), o)});
    ++k;
  }
  io::save_packed(path, out, {});
  {
    // The generic codebook's tables are in the metadata (decompress needs no table file); the
    // implicit ones are not (their string defines them).
    std::ifstream f(path, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string h(n, ' ');
    f.read(h.data(), static_cast<std::streamsize>(n));
    const auto meta = nlohmann::json::parse(h)["__metadata__"];
    ASSERT_TRUE(meta.contains("w2.codebook"));
    EXPECT_FALSE(meta.contains("w0.codebook"));
    const auto t = nlohmann::json::parse(meta["w2.codebook"].get<std::string>());
    EXPECT_EQ(t["codebook"], "cb31_e3m2fnuz_pk");
    EXPECT_EQ(t["names"][1], "narrow");
    EXPECT_EQ(t["mappings"][1][7].get<double>(), 12.0);
  }
  const std::vector<io::PackedTensor> back = io::load_packed(path);
  ASSERT_EQ(back.size(), out.size());
  for (const io::PackedTensor& pt : back) {
    const int i = pt.name.back() - '0';
    const CastResult& a = out[i].result;
    const CastResult& b = pt.result;
    EXPECT_EQ(b.dtype, a.dtype) << pt.name;
    EXPECT_EQ(b.dtype.str(), a.dtype.str()) << pt.name;
    EXPECT_TRUE(same_bits(a.codes, b.codes)) << pt.name;
    EXPECT_TRUE(same_bits(a.meta, b.meta)) << pt.name;
    EXPECT_TRUE(same_bits(a.scale, b.scale)) << pt.name;
    EXPECT_TRUE(same_bits(upcast(b), virt[i])) << pt.name << " seed " << seed;
  }
  // A stored meta entry beyond the codebook's mappings is an error naming it, not a read past
  // the table.
  CastResult bad = unpack(back[2].result);
  bad.meta.mutable_ptr<uint8_t>()[1] = 7;
  try {
    upcast(bad);
    FAIL() << "meta 7 of 2 mappings was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("selects mapping 7"), std::string::npos) << e.what();
  }
}
