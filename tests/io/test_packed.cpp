// Packed files: cast (compress) -> save_packed -> load_packed -> upcast equals the virtual cast
// bit for bit, and `decompress`-style readers reject tampered layouts.
#include "io_test_util.hpp"

namespace castscope::iotest {
namespace {

Tensor random_tensor(std::mt19937_64& rng, Shape shape) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(-6.0f, 6.0f);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = nd(rng) * std::exp2(scale(rng) * (i % 7 == 0));
  return t;
}

TEST(Packed, RoundTripEqualsVirtualCast) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 20);
  TempDir dir;
  const char* dtypes[] = {"mxfp4e2", "nvfp4", "mx9", "uint4_fi32", "tcfp12", "e4m3fn_e8m0_t16n2m4"};
  std::vector<io::PackedTensor> pts;
  std::vector<Tensor> virt;
  for (const char* d : dtypes) {
    const DataType dt = DataType::parse(d);
    const Tensor x = random_tensor(rng, {2 + static_cast<int64_t>(rng() % 3), 64});
    CastOptions o = cpu_options(CastMode::Compress);
    pts.push_back({std::string("t.") + d, cast(x, dt, o)});
    o.mode = CastMode::Virtual;
    virt.push_back(cast(x, dt, o).values);
  }
  const std::string path = dir / "p.safetensors";
  io::save_packed(path, pts, {{"note", "test"}});
  const std::vector<io::PackedTensor> back = io::load_packed(path);
  ASSERT_EQ(back.size(), pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const io::PackedTensor* p = nullptr;
    for (const io::PackedTensor& b : back)
      if (b.name == pts[i].name) p = &b;
    ASSERT_NE(p, nullptr) << pts[i].name;
    SCOPED_TRACE(pts[i].name);
    EXPECT_EQ(p->result.dtype, pts[i].result.dtype);
    EXPECT_EQ(p->result.shape, pts[i].result.shape);
    const Tensor u = upcast(p->result);
    ASSERT_EQ(u.numel(), virt[i].numel());
    EXPECT_EQ(std::memcmp(u.data(), virt[i].data(), u.nbytes()), 0)
        << "upcast differs from the virtual cast";
  }
  // The packed file is also a plain safetensors model.
  auto m = io::open_model(path);
  EXPECT_GE(m->tensors().size(), pts.size());
}

// A packed mxfp4e2 file of one random [4, 64] tensor "w", split into its JSON header and data.
std::pair<std::string, Bytes> packed_mxfp4(std::mt19937_64& rng, const TempDir& dir) {
  return split_safetensors(
      save_packed_w(dir / "p.safetensors", random_tensor(rng, {4, 64}), "mxfp4e2"));
}

TEST(Packed, TamperedLayoutIsAnError) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 21);
  TempDir dir;
  // Named variables, not structured bindings: the lambdas below capture them (clang 14).
  const std::pair<std::string, Bytes> packed = packed_mxfp4(rng, dir);
  const std::string& header = packed.first;
  const Bytes& data = packed.second;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string h = header;
    const size_t at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) h.replace(at, from.size(), to);
    return safetensors_bytes(h, data);
  };
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"bigger original shape", with("\"[4,64]\"", "\"[8,64]\"")},
      {"huge original shape", with("\"[4,64]\"", "\"[4000000000,64000000]\"")},
      {"other datatype",
       with("\"w.dtype\":\"e2m1fnuz_e8m0_t32\"", "\"w.dtype\":\"e4m3fn_e8m0_t32\"")},
      {"bad datatype",
       with("\"w.dtype\":\"e2m1fnuz_e8m0_t32\"", "\"w.dtype\":\"e2m1fnuz_e8m0_t\"")},
      {"bad mode", with("\"compress\"", "\"virtual\"")},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    write_file(dir / "bad.safetensors", bytes);
    EXPECT_THROW(io::load_packed(dir / "bad.safetensors"), Error);
  }
}

// Header numbers that do not fit their field (floats, hundreds of digits, negative, past 2^64)
// must be refused with an Error naming the file and the field; converting them blindly is
// undefined behaviour.
TEST(Packed, HeaderNumbersOutOfRangeNameTheField) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 22);
  TempDir dir;
  // Named variables, not structured bindings: the lambdas below capture them (clang 14).
  const std::pair<std::string, Bytes> packed = packed_mxfp4(rng, dir);
  const std::string& header = packed.first;
  const Bytes& data = packed.second;
  const std::string huge = "3" + std::string(300, '5') + "2";
  struct Case {
    const char* what;
    std::string from, to;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"float dimension", "\"[4,64]\"", "\"[4.5,64]\"", "w.shape"},
      {"300-digit dimension", "\"[4,64]\"", "\"[4," + huge + "]\"", "w.shape"},
      {"dimension 1e300", "\"[4,64]\"", "\"[4,1e300]\"", "w.shape"},
      {"negative dimension", "\"[4,64]\"", "\"[-4,64]\"", "w.shape"},
      {"shape not a list", "\"[4,64]\"", "\"4x64\"", "w.shape"},
      {"axis past int64", "\"w.axis\":\"-1\"", "\"w.axis\":\"99999999999999999999999\"", "w.axis"},
      {"axis not an integer", "\"w.axis\":\"-1\"", "\"w.axis\":\"1.5\"", "w.axis"},
      {"axis out of range", "\"w.axis\":\"-1\"", "\"w.axis\":\"100000\"", "w.axis"},
      {"negative seed", "\"w.seed\":\"0\"", "\"w.seed\":\"-1\"", "w.seed"},
      {"seed past 2^64", "\"w.seed\":\"0\"", "\"w.seed\":\"18446744073709551616\"", "w.seed"},
      {"part dimension float", "\"shape\":[4,2]", "\"shape\":[4,2.0]", "shape"},
      {"part dimension huge", "\"shape\":[4,2]", "\"shape\":[4,1e40]", "shape"},
      {"offset float", "\"data_offsets\":[0,", "\"data_offsets\":[0.5,", "data_offsets"},
      {"offset past 2^64", "\"data_offsets\":[0,", "\"data_offsets\":[" + huge + ",",
       "data_offsets"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string h = header;
    const size_t at = h.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from << " not in " << h;
    h.replace(at, c.from.size(), c.to);
    const std::string bad = dir / "bad.safetensors";
    write_file(bad, safetensors_bytes(h, data));
    try {
      io::load_packed(bad);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(bad), std::string::npos) << "does not name the file: " << msg;
      EXPECT_NE(msg.find(c.field), std::string::npos) << "does not name " << c.field << ": " << msg;
    }
  }
}

// The fuzzer's finding: a 300-digit dimension in the packed metadata (kept in the fuzz corpus).
TEST(Packed, FuzzFindingShapeOverflow) {
  const std::string path =
      std::string(CASTSCOPE_SOURCE_DIR) + "/fuzz/corpus/packed/finding-shape-overflow.safetensors";
  try {
    io::load_packed(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tensor.shape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace castscope::iotest

namespace castscope::iotest {
namespace {

// A packed MX9 file written before subtile offsets had a spelling: its dtype reads
// "int8_e8m0_t16s2" and its meta holds one bit per pair, 8 per byte. It must still load as MX9
// (now int8_e8m0_t16s2o1) and decode as docs/export-formats.md says: q * 2^-6 * 2^(X - 127 - u),
// with q sign-magnitude and u the pair's bit.
TEST(Packed, ReadsMx9WrittenBeforeOffsets) {
  const std::string path =
      std::string(CASTSCOPE_SOURCE_DIR) + "/fuzz/corpus/packed/mx9.safetensors";
  const std::vector<io::PackedTensor> back = io::load_packed(path);
  ASSERT_EQ(back.size(), 1u);
  const CastResult& r = back[0].result;
  EXPECT_EQ(r.dtype.str(), "int8_e8m0_t16s2o1");
  EXPECT_EQ(r.dtype.name(), "mx9");
  ASSERT_EQ(r.shape, (Shape{2, 32}));
  const Tensor u = upcast(r);
  const uint8_t* codes = static_cast<const uint8_t*>(r.codes.data());
  const uint8_t* scale = r.scale.ptr<uint8_t>();
  const uint8_t* meta = r.meta.ptr<uint8_t>();
  int lowered = 0;
  for (int row = 0; row < 2; ++row)
    for (int j = 0; j < 32; ++j) {
      const uint8_t c = codes[row * 32 + j];
      const int q = (c & 0x80) ? -(c & 0x7F) : (c & 0x7F);
      const int x = scale[row * 2 + j / 16];
      const int pair = j / 2;  // 16 pairs per row, 8 per meta byte
      const int bit = (meta[row * 2 + pair / 8] >> (pair % 8)) & 1;
      lowered += bit;
      const float want = static_cast<float>(std::ldexp(q, -6 + x - 127 - bit));
      EXPECT_EQ(u.ptr<float>()[row * 32 + j], want) << "row " << row << " j " << j;
    }
  EXPECT_GT(lowered, 0);  // the file exercises the offset bits
  EXPECT_LT(lowered, 64);
}

}  // namespace
}  // namespace castscope::iotest
