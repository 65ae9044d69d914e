// The dense packed layout (castscope.version 4): values narrower than their storage are written
// back to back, files of the earlier layout still read, and decoding gives the cast's bits.
#include <cmath>
#include <nlohmann/json.hpp>

#include "io_test_util.hpp"

namespace castscope::iotest {
namespace {

Tensor random_tensor(std::mt19937_64& rng, Shape shape) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-5, 5), z(0, 30);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = z(rng) == 0 ? 0.0f : std::ldexp(nd(rng), e(rng));
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (!a || !b) return !a && !b;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.ptr<float>()[i], y = b.ptr<float>()[i];
    if (std::memcmp(&x, &y, 4) != 0 && !(std::isnan(x) && std::isnan(y))) return false;
  }
  return true;
}

struct StFile {
  nlohmann::json header;
  uint64_t header_bytes = 0, data_bytes = 0;
};

StFile read_st(const std::string& path) {
  const Bytes b = read_file(path);
  uint64_t hl = 0;
  std::memcpy(&hl, b.data(), 8);
  StFile f;
  f.header = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + static_cast<int64_t>(hl));
  f.header_bytes = 8 + hl;
  f.data_bytes = b.size() - f.header_bytes;
  return f;
}

uint64_t part_bytes(const StFile& f, const std::string& key) {
  const auto& off = f.header.at(key).at("data_offsets");
  return off[1].get<uint64_t>() - off[0].get<uint64_t>();
}

struct Case {
  const char* dtype;
  Shape shape;
  // Bytes of the codes when every value takes exactly its bits (computed here from the format,
  // not from the writer): values stored x bits each.
  int64_t values;
  int bits;
};

// Every width that memory keeps wider than it is: 6-, 5-, 7- and 3-bit codes (float, two's
// complement and sign-magnitude), rows that end inside a byte (odd lengths), N:M masks,
// subtile offsets, codebook indices and mapping numbers, TCFP-12 residuals.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mxfp6e2", {5, 72}, 5 * 72, 6},
      {"mxfp6e3", {3, 64}, 3 * 64, 6},
      {"e2m2_e8m0_t32", {4, 40}, 4 * 40, 5},
      {"e3m3_e8m0_t32", {3, 33}, 3 * 33, 7},
      {"int3_float32_t32", {5, 37}, 5 * 37, 3},
      {"int5_float16_t16", {2, 48}, 2 * 48, 5},
      {"int7_float32_t0", {3, 20}, 3 * 20, 7},
      {"uint5_float16_float16_t8", {4, 24}, 4 * 24, 5},
      {"mx4", {3, 48}, 3 * 48, 3},
      {"mx6", {2, 80}, 2 * 80, 5},
      {"mxfp4e2", {7, 33}, 7 * 33, 4},
      {"e2m1_e8m0_t32n2m4", {3, 36}, 3 * 18, 4},
      {"e3m2_e8m0_t32n2m4", {4, 40}, 4 * 20, 6},
      {"e4m3fn_e8m0_t16n2m4", {5, 20}, 5 * 10, 8},
      {"e2m1_e32s4o2", {3, 40}, 3 * 40, 4},
      {"icb44fi_e4m3fn_e8m0_t32s8", {3, 40}, 3 * 40, 4},
      {"tcfp12", {3, 35}, 3 * 35, 8},
      // One axis of a few values: the dense stream has as many bytes as the unpacked codes.
      {"e3m2", {2}, 2, 6},
      {"e2m3", {1}, 1, 6},
      {"int3_float32", {3}, 3, 3},
      {"mxfp6e2", {40}, 40, 6},
  };
  return c;
}

TEST(PackedDense, EveryNarrowWidthIsStoredInItsBitsAndRoundTrips) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 38);
  TempDir dir;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.dtype);
    const DataType d = DataType::parse(c.dtype);
    const Tensor x = random_tensor(rng, c.shape);
    CastOptions o = cpu_options(CastMode::Compress);
    const CastResult r = cast(x, d, o);
    o.mode = CastMode::Virtual;
    const Tensor v = cast(x, d, o).values;
    const std::string path = dir / "d.safetensors";
    io::save_packed(path, {{"w", r}});
    const StFile f = read_st(path);
    // The codes take exactly their bits, rounded up to a byte once for the whole tensor.
    EXPECT_EQ(part_bytes(f, "w"), static_cast<uint64_t>((c.values * c.bits + 7) / 8));
    if (r.mask) EXPECT_EQ(part_bytes(f, "w.mask"), static_cast<uint64_t>((x.numel() + 7) / 8));
    if (const TileSpec* st = d.subtile(); st && d.family() == Family::Standard) {
      const int64_t L = c.shape.back(), rows = x.numel() / L;
      const int64_t offsets = rows * ((L + st->size - 1) / st->size) * (st->size / st->sub);
      EXPECT_EQ(part_bytes(f, "w.meta"), static_cast<uint64_t>((offsets * st->offset + 7) / 8));
    }
    if (d.family() == Family::Codebook) {
      const int64_t L = c.shape.back(), rows = x.numel() / L;
      const TileSpec& t = d.scale()->tiles[0];
      const int64_t maps = rows * ((L + t.size - 1) / t.size) * (t.size / t.sub);
      EXPECT_EQ(part_bytes(f, "w.meta"),
                static_cast<uint64_t>((maps * d.codebook()->meta_bits + 7) / 8));
    }
    if (d.family() == Family::TCFP12)
      EXPECT_EQ(part_bytes(f, "w.residual"), static_cast<uint64_t>((x.numel() * 4 + 7) / 8));
    // Back in memory: the compressed result's every part, byte for byte, and the cast's values.
    const std::vector<io::PackedTensor> back = io::load_packed(path);
    ASSERT_EQ(back.size(), 1u);
    for (const io::PackedPart& p : io::packed_parts())
      EXPECT_TRUE(same_bytes(back[0].result.*(p.member), r.*(p.member)))
          << "part '" << p.suffix << "' reads back different bytes";
    EXPECT_TRUE(same_bits(upcast(back[0].result), v)) << "upcast differs from the virtual cast";
  }
}

// FP4 codes in rows of even length are laid out the same either way: such files keep version 1
// (readers that predate the dense layout read them), while a 6-bit code makes a file version 4.
TEST(PackedDense, VersionFourOnlyWhereTheLayoutDiffers) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 39);
  TempDir dir;
  const CastOptions o = cpu_options(CastMode::Compress);
  const Tensor x = random_tensor(rng, {4, 64});
  io::save_packed(dir / "a.safetensors", {{"w", cast(x, DataType::parse("mxfp4e2"), o)}});
  EXPECT_EQ(read_st(dir / "a.safetensors").header["__metadata__"]["castscope.version"], "1");
  io::save_packed(dir / "b.safetensors", {{"w", cast(x, DataType::parse("mxfp4e2"), o)},
                                          {"v", cast(x, DataType::parse("mxfp6e2"), o)}});
  EXPECT_EQ(read_st(dir / "b.safetensors").header["__metadata__"]["castscope.version"], "4");
}

// Files of the earlier layout (one FP6 code a byte, 3-bit codes in nibbles, rows padded to a
// byte), written by `castscope-cli cast --mode compress` before the dense layout, with the
// virtual cast of the same input beside each: they read, decode to those bits, and written again
// they shrink to the dense layout and still decode the same.
TEST(PackedDense, FilesWrittenBeforeStillRead) {
  TempDir dir;
  const fs::path fixtures = fs::path(CASTSCOPE_SOURCE_DIR) / "tests/data/packed_v1";
  int n = 0;
  for (const auto& e : fs::directory_iterator(fixtures)) {
    if (e.path().extension() != ".safetensors") continue;
    SCOPED_TRACE(e.path().filename().string());
    ++n;
    EXPECT_EQ(read_st(e.path().string()).header["__metadata__"]["castscope.version"], "1");
    const std::vector<io::PackedTensor> old = io::load_packed(e.path().string());
    ASSERT_EQ(old.size(), 1u);
    fs::path want_path = e.path();
    want_path.replace_extension(".npy");
    const Tensor want = io::load_npy(want_path.string());
    EXPECT_TRUE(same_bits(upcast(old[0].result), want));
    const std::string again = dir / "again.safetensors";
    io::save_packed(again, old);
    EXPECT_LE(fs::file_size(again), fs::file_size(e.path()) + 64);  // the metadata grew a key
    EXPECT_LT(read_st(again).data_bytes, read_st(e.path().string()).data_bytes + 1);
    const std::vector<io::PackedTensor> back = io::load_packed(again);
    ASSERT_EQ(back.size(), 1u);
    for (const io::PackedPart& p : io::packed_parts())
      EXPECT_TRUE(same_bytes(back[0].result.*(p.member), old[0].result.*(p.member)))
          << "part '" << p.suffix << "'";
    EXPECT_TRUE(same_bits(upcast(back[0].result), want));
  }
  EXPECT_GE(n, 10);
}

// A dense part must hold exactly its values' bits; a later layout version is refused by name.
TEST(PackedDense, WrongDenseSizesAndNewerVersionsAreErrors) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 40);
  TempDir dir;
  const auto [header, data] = split_safetensors(
      save_packed_w(dir / "p.safetensors", random_tensor(rng, {2, 32}), "mxfp6e2"));
  // 64 codes of 6 bits: 48 bytes.
  ASSERT_NE(header.find("\"shape\":[48]"), std::string::npos) << header;
  struct Bad {
    std::string from, to, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"\"castscope.version\":\"4\"", "\"castscope.version\":\"5\"", "version 5"},
           {"\"castscope.version\":\"4\"", "\"castscope.version\":\"1\"", "'w'"},
       }) {
    SCOPED_TRACE(b.to);
    std::string h = header;
    h.replace(h.find(b.from), b.from.size(), b.to);
    write_file(dir / "bad.safetensors", safetensors_bytes(h, data));
    try {
      io::load_packed(dir / "bad.safetensors");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(dir / "bad.safetensors"), std::string::npos) << e.what();
    }
  }
}

// The overflow choice of a cast travels with its codes; files without the key were saturating.
TEST(PackedDense, OverflowIsRecorded) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 41);
  TempDir dir;
  CastOptions o = cpu_options(CastMode::Compress);
  o.overflow = Overflow::IEEE;
  io::save_packed(dir / "p.safetensors",
                  {{"w", cast(random_tensor(rng, {2, 32}), DataType::parse("e4m3fn"), o)}});
  EXPECT_EQ(read_st(dir / "p.safetensors").header["__metadata__"]["w.overflow"], "ieee");
  EXPECT_EQ(io::load_packed(dir / "p.safetensors")[0].result.options.overflow, Overflow::IEEE);
  const fs::path old = fs::path(CASTSCOPE_SOURCE_DIR) / "tests/data/packed_v1/mxfp6e2.safetensors";
  EXPECT_EQ(io::load_packed(old.string())[0].result.options.overflow, Overflow::Saturate);
}

// A fuzzed file: a 124-digit dimension in tensor.shape, a mangled mode key and a part of dtype
// "U937]". Reading it is an error naming the file and the field, never a crash.
TEST(PackedDense, FuzzFindingHugeShapeAndBadDtypes) {
  const std::string path = std::string(CASTSCOPE_SOURCE_DIR) +
                           "/fuzz/corpus/packed/finding-packed-shape-overflow.safetensors";
  ASSERT_TRUE(fs::exists(path));
  try {
    io::load_packed(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor.shape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  }
  // With the dimension repaired, the next fault is named instead: the missing mode.
  Bytes b = read_file(path);
  std::string s(b.begin(), b.end());
  const size_t at = s.find("[2,3555");
  ASSERT_NE(at, std::string::npos);
  const size_t end = s.find(']', at);
  s.replace(at, end + 1 - at, "[2,8]" + std::string(end + 1 - at - 5, ' '));
  TempDir dir;
  write_file(dir / "f.safetensors", Bytes(s.begin(), s.end()));
  try {
    io::load_packed(dir / "f.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no mode"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(dir / "f.safetensors"), msg.rfind(dir / "f.safetensors"))
        << "names the file twice: " << msg;
  }
}

}  // namespace
}  // namespace castscope::iotest
