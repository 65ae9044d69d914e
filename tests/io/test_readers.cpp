// Round trips through files written here with fresh random data: every safetensors dtype, .npy
// in C and Fortran order and big-endian, .npz stored and deflated, GGUF block formats, ONNX
// (inline, typed fields, Constant nodes, external data), directories and index.json models.
#include <cmath>

#include "io_test_util.hpp"

#ifdef CASTSCOPE_TEST_LIBZIP
#include <zip.h>
#endif

namespace castscope::iotest {
namespace {

struct DtypeCase {
  const char* st;
  size_t size;
};
constexpr DtypeCase kStDtypes[] = {{"F64", 8},     {"F32", 4},     {"F16", 2}, {"BF16", 2},
                                   {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4},
                                   {"I16", 2},     {"I8", 1},      {"U64", 8}, {"U32", 4},
                                   {"U16", 2},     {"U8", 1},      {"BOOL", 1}};

// Random raw bytes valid for the dtype, and the float32 each element stands for (decoded here
// from the bit layout, not by the engine).
void random_elements(std::mt19937_64& rng, const std::string& d, size_t n, Bytes& raw,
                     std::vector<float>& want) {
  std::normal_distribution<double> nd(0.0, 3.0);
  for (size_t i = 0; i < n; ++i) {
    const double x = nd(rng);
    if (d == "F64")
      put<double>(raw, x), want.push_back(static_cast<float>(x));
    else if (d == "F32")
      put<float>(raw, static_cast<float>(x)), want.push_back(static_cast<float>(x));
    else if (d == "F16") {
      const uint16_t h = float_to_half(static_cast<float>(x));
      put<uint16_t>(raw, h);
      // Independent half decode from the bit fields.
      const int e = (h >> 10) & 31, m = h & 1023;
      float v =
          e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
      want.push_back((h & 0x8000) ? -v : v);
    } else if (d == "BF16") {
      const uint16_t b = static_cast<uint16_t>(rng() & 0x7F7F);  // finite codes of both signs
      const uint16_t code = static_cast<uint16_t>(b | ((rng() & 1) << 15));
      put<uint16_t>(raw, code);
      uint32_t bits = static_cast<uint32_t>(code) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      want.push_back(f);
    } else if (d == "F8_E4M3" || d == "F8_E5M2") {
      const uint8_t c = static_cast<uint8_t>(rng());
      raw.push_back(c);
      want.push_back(fp8_value(c, d == "F8_E4M3"));
    } else if (d == "BOOL") {
      const uint8_t c = rng() & 1;
      raw.push_back(c);
      want.push_back(c);
    } else {
      const int bytes = std::stoi(d.substr(1)) / 8;
      const bool sign = d[0] == 'I';
      const int64_t v = sign ? static_cast<int64_t>(rng() % 2000001) - 1000000
                             : static_cast<int64_t>(rng() % 70000 % (bytes == 1 ? 256 : 70000));
      const int64_t vv = bytes == 1   ? (sign ? v % 128 : v % 256)
                         : bytes == 2 ? (sign ? v % 32768 : v % 65536)
                                      : v;
      put_bytes(raw, &vv, bytes);  // little-endian host
      want.push_back(static_cast<float>(vv));
    }
  }
}

TEST(Safetensors, EveryDtypeRoundTrips) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed());
  TempDir dir;
  std::vector<StTensor> ts;
  std::vector<std::vector<float>> wants;
  for (const DtypeCase& c : kStDtypes) {
    StTensor t{std::string("t_") + c.st, c.st, {3, 5 + static_cast<int64_t>(rng() % 7)}, {}};
    std::vector<float> w;
    random_elements(rng, c.st, static_cast<size_t>(t.shape[0] * t.shape[1]), t.data, w);
    ts.push_back(t);
    wants.push_back(w);
  }
  const std::string path = dir / "all.safetensors";
  write_file(path, safetensors_bytes(ts));
  auto m = io::open_model(path);
  EXPECT_EQ(m->format(), "safetensors");
  ASSERT_EQ(m->tensors().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    SCOPED_TRACE(ts[i].dtype);
    const io::TensorInfo* info = m->find(ts[i].name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, ts[i].dtype);
    EXPECT_EQ(info->shape, ts[i].shape);
    EXPECT_EQ(info->nbytes, ts[i].data.size());
    EXPECT_EQ(m->tensors()[i].name, ts[i].name) << "listing is in file order";
    const Tensor t = m->load(ts[i].name);
    ASSERT_EQ(t.dtype(), DType::F32);
    ASSERT_EQ(t.shape(), ts[i].shape);
    for (int64_t k = 0; k < t.numel(); ++k)
      ASSERT_TRUE(same_float(t.ptr<float>()[k], wants[i][k]))
          << "element " << k << ": " << t.ptr<float>()[k] << " vs " << wants[i][k];
    const Tensor raw = m->load_raw(ts[i].name);
    EXPECT_EQ(raw.dtype(), io::parse_safetensors_dtype(ts[i].dtype));
    ASSERT_EQ(raw.nbytes(), ts[i].data.size());
    EXPECT_EQ(std::memcmp(raw.data(), ts[i].data.data(), raw.nbytes()), 0);
  }
  EXPECT_THROW(m->load("nope"), Error);
}

TEST(Safetensors, IndexJsonAndDirectoryOpenAsOneModel) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 1);
  TempDir dir;
  std::vector<float> wa, wb;
  StTensor a{"layer.0.w", "F32", {4, 8}, {}}, b{"layer.1.w", "BF16", {2, 16}, {}};
  random_elements(rng, "F32", 32, a.data, wa);
  random_elements(rng, "BF16", 32, b.data, wb);
  write_file(dir / "model-00001-of-00002.safetensors", safetensors_bytes({a}));
  write_file(dir / "model-00002-of-00002.safetensors", safetensors_bytes({b}));
  write_file(dir / "model.safetensors.index.json", Bytes{});  // replaced below
  const std::string idx =
      R"({"metadata": {"total_size": 128}, "weight_map": {"layer.0.w": "model-00001-of-00002.safetensors", "layer.1.w": "model-00002-of-00002.safetensors"}})";
  write_file(dir / "model.safetensors.index.json", Bytes(idx.begin(), idx.end()));
  for (const std::string& p : {dir / "model.safetensors.index.json", dir.path().string()}) {
    SCOPED_TRACE(p);
    auto m = io::open_model(p);
    ASSERT_EQ(m->tensors().size(), 2u);
    const Tensor ta = m->load("layer.0.w"), tb = m->load("layer.1.w");
    for (int k = 0; k < 32; ++k) {
      ASSERT_TRUE(same_float(ta.ptr<float>()[k], wa[k]));
      ASSERT_TRUE(same_float(tb.ptr<float>()[k], wb[k]));
    }
    EXPECT_NE(m->find("layer.1.w")->file.find("00002"), std::string::npos);
  }
  // An index naming a tensor that its file lacks is an error naming both.
  const std::string bad = R"({"weight_map": {"missing.w": "model-00001-of-00002.safetensors"}})";
  write_file(dir / "bad.safetensors.index.json", Bytes(bad.begin(), bad.end()));
  try {
    io::open_model(dir / "bad.safetensors.index.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.w"), std::string::npos) << e.what();
  }
}

TEST(Npy, CFortranAndBigEndian) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 2);
  std::normal_distribution<float> nd;
  TempDir dir;
  const int64_t R = 3 + rng() % 4, C = 2 + rng() % 5;
  std::vector<float> x(R * C);
  for (float& v : x) v = nd(rng);
  // C order, little-endian float32.
  Bytes c;
  put_bytes(c, x.data(), x.size() * 4);
  write_file(dir / "c.npy", npy_bytes("<f4", {R, C}, false, c));
  // Fortran order: column-major bytes of the same array.
  Bytes f;
  for (int64_t j = 0; j < C; ++j)
    for (int64_t i = 0; i < R; ++i) put<float>(f, x[i * C + j]);
  write_file(dir / "f.npy", npy_bytes("<f4", {R, C}, true, f));
  // Big-endian float64 and int32.
  Bytes be, bi;
  for (float v : x) {
    double d = v;
    uint8_t t[8];
    std::memcpy(t, &d, 8);
    for (int k = 7; k >= 0; --k) be.push_back(t[k]);
    const int32_t iv = static_cast<int32_t>(v * 1000);
    uint8_t u[4];
    std::memcpy(u, &iv, 4);
    for (int k = 3; k >= 0; --k) bi.push_back(u[k]);
  }
  write_file(dir / "be.npy", npy_bytes(">f8", {R, C}, false, be));
  write_file(dir / "bi.npy", npy_bytes(">i4", {R, C}, false, bi));
  for (const char* name : {"c.npy", "f.npy", "be.npy", "bi.npy"}) {
    SCOPED_TRACE(name);
    auto m = io::open_model(dir / name);
    ASSERT_EQ(m->tensors().size(), 1u);
    const io::TensorInfo& info = m->tensors()[0];
    EXPECT_EQ(info.shape, (Shape{R, C}));
    const Tensor t = m->load(info.name);
    const bool is_int = std::string(name) == "bi.npy";
    for (int64_t k = 0; k < R * C; ++k) {
      const float want = is_int ? static_cast<float>(static_cast<int32_t>(x[k] * 1000)) : x[k];
      ASSERT_EQ(t.ptr<float>()[k], want) << "element " << k;
    }
    // load_npy gives the stored dtype in C order, native endian.
    const Tensor direct = io::load_npy(dir / name);
    EXPECT_EQ(direct.shape(), (Shape{R, C}));
    EXPECT_EQ(direct.to_f32().ptr<float>()[R * C - 1], t.ptr<float>()[R * C - 1]);
  }
  // save_npy -> load_npy keeps the bits.
  Tensor s = Tensor::empty(DType::F32, {R, C});
  std::memcpy(s.mutable_data(), x.data(), x.size() * 4);
  io::save_npy(dir / "s.npy", s);
  const Tensor back = io::load_npy(dir / "s.npy");
  EXPECT_EQ(std::memcmp(back.data(), x.data(), x.size() * 4), 0);
}

#ifdef CASTSCOPE_TEST_LIBZIP
void write_npz(const std::string& path, const std::vector<std::pair<std::string, Bytes>>& members,
               bool deflate) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  for (const auto& [name, b] : members) {
    zip_source_t* s = zip_source_buffer(z, b.data(), b.size(), 0);
    ASSERT_NE(s, nullptr);
    const zip_int64_t i = zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE);
    ASSERT_GE(i, 0);
    ASSERT_EQ(zip_set_file_compression(z, static_cast<zip_uint64_t>(i),
                                       deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
              0);
  }
  ASSERT_EQ(zip_close(z), 0);
}

TEST(Npz, StoredAndDeflated) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 3);
  std::normal_distribution<float> nd;
  TempDir dir;
  std::vector<float> x(64 * 9);
  for (float& v : x) v = nd(rng);
  Bytes raw, ints;
  put_bytes(raw, x.data(), x.size() * 4);
  for (int i = 0; i < 7; ++i) put<int64_t>(ints, static_cast<int64_t>(rng() % 1000));
  const std::vector<std::pair<std::string, Bytes>> members = {
      {"w.npy", npy_bytes("<f4", {64, 9}, false, raw)},
      {"pos.npy", npy_bytes("<i8", {7}, false, ints)}};
  for (bool deflate : {false, true}) {
    SCOPED_TRACE(deflate ? "deflated" : "stored");
    const std::string path = dir / (deflate ? "d.npz" : "s.npz");
    write_npz(path, members, deflate);
    auto m = io::open_model(path);
    EXPECT_EQ(m->format(), "npz");
    ASSERT_EQ(m->tensors().size(), 2u);
    ASSERT_NE(m->find("w"), nullptr);
    EXPECT_EQ(m->find("pos")->dtype, "int64");
    const Tensor t = m->load("w");
    EXPECT_EQ(std::memcmp(t.data(), x.data(), x.size() * 4), 0);
    const Tensor p = m->load_raw("pos");
    EXPECT_EQ(std::memcmp(p.data(), ints.data(), ints.size()), 0);
  }
}
#endif

// GGUF blocks are built here from random scales and codes; the expected values follow the
// format's definition (E2M1 table and 2^(e-127) for MXFP4, d * q for Q8_0 / Q4_0).
TEST(Gguf, FloatAndBlockFormats) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 4);
  std::normal_distribution<float> nd;
  TempDir dir;
  const uint64_t rows = 1 + rng() % 3, cols = 64;
  const size_t n = rows * cols;
  std::vector<GgufTensor> ts;
  std::vector<std::vector<float>> want(5);
  {  // F32
    GgufTensor t{"f32", 0, {cols, rows}, {}};
    for (size_t i = 0; i < n; ++i) {
      const float v = nd(rng);
      put<float>(t.data, v);
      want[0].push_back(v);
    }
    ts.push_back(t);
  }
  {  // F16
    GgufTensor t{"f16", 1, {cols, rows}, {}};
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = float_to_half(nd(rng));
      put<uint16_t>(t.data, h);
      want[1].push_back(half_to_float(h));
    }
    ts.push_back(t);
  }
  {  // Q8_0
    GgufTensor t{"q8_0", 8, {cols, rows}, {}};
    for (size_t b = 0; b < n / 32; ++b) {
      const uint16_t d = float_to_half(0.01f + 0.05f * std::fabs(nd(rng)));
      put<uint16_t>(t.data, d);
      for (int j = 0; j < 32; ++j) {
        const int8_t q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        put<int8_t>(t.data, q);
        want[2].push_back(half_to_float(d) * q);
      }
    }
    ts.push_back(t);
  }
  {  // Q4_0
    GgufTensor t{"q4_0", 2, {cols, rows}, {}};
    for (size_t b = 0; b < n / 32; ++b) {
      const uint16_t d = float_to_half(0.01f + 0.05f * std::fabs(nd(rng)));
      put<uint16_t>(t.data, d);
      uint8_t q[32];
      for (uint8_t& v : q) v = rng() & 15;
      for (int j = 0; j < 16; ++j) t.data.push_back(static_cast<uint8_t>(q[j] | (q[j + 16] << 4)));
      for (int j = 0; j < 32; ++j) want[3].push_back(half_to_float(d) * (q[j] - 8));
    }
    ts.push_back(t);
  }
  {  // MXFP4
    static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    GgufTensor t{"mxfp4", 39, {cols, rows}, {}};
    for (size_t b = 0; b < n / 32; ++b) {
      const uint8_t e = static_cast<uint8_t>(110 + rng() % 30);
      t.data.push_back(e);
      uint8_t q[32];
      for (uint8_t& v : q) v = rng() & 15;
      for (int j = 0; j < 16; ++j) t.data.push_back(static_cast<uint8_t>(q[j] | (q[j + 16] << 4)));
      for (int j = 0; j < 32; ++j) {
        const float mag = kE2M1[q[j] & 7] * std::ldexp(1.0f, e - 127);
        // ggml's table has no negative zero: code 8 decodes to +0.
        want[4].push_back((q[j] & 8) && mag != 0 ? -mag : mag);
      }
    }
    ts.push_back(t);
  }
  const std::string path = dir / "m.gguf";
  write_file(path, gguf_bytes(ts));
  auto m = io::open_model(path);
  EXPECT_EQ(m->format(), "gguf");
  ASSERT_EQ(m->tensors().size(), ts.size());
  const char* names[] = {"F32", "F16", "Q8_0", "Q4_0", "MXFP4"};
  for (size_t i = 0; i < ts.size(); ++i) {
    SCOPED_TRACE(ts[i].name);
    const io::TensorInfo& info = m->tensors()[i];
    EXPECT_EQ(info.dtype, names[i]);
    EXPECT_EQ(info.shape, (Shape{static_cast<int64_t>(rows), static_cast<int64_t>(cols)}));
    EXPECT_EQ(info.nbytes, ts[i].data.size());
    EXPECT_TRUE(io::is_float_storage(info.dtype));
    const Tensor t = m->load(info.name);
    ASSERT_EQ(t.numel(), static_cast<int64_t>(n));
    for (size_t k = 0; k < n; ++k)
      ASSERT_TRUE(same_float(t.ptr<float>()[k], want[i][k])) << "element " << k;
  }
  EXPECT_THROW(m->load_raw("q4_0"), Error);
}

}  // namespace
}  // namespace castscope::iotest
