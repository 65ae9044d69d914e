// Hostile inputs: every one must give castscope::Error (never a crash, hang or huge allocation).
#include "io_test_util.hpp"

#ifdef CASTSCOPE_TEST_LIBZIP
#include <zip.h>
#endif
#ifdef CASTSCOPE_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace castscope::iotest {
namespace {

// Opens, lists and loads everything; returns normally only if all of it worked.
void open_and_load(const std::string& path) {
  auto m = io::open_model(path);
  for (const io::TensorInfo& t : m->tensors()) m->load(t.name);
}

// Either a full success or an Error; anything else (another exception type) fails the test.
bool succeeds_or_errors(const std::string& path) {
  try {
    open_and_load(path);
    return true;
  } catch (const Error&) {
    return false;
  }
}

Bytes valid_safetensors(std::mt19937_64& rng) {
  StTensor a{"a", "F32", {3, 4}, {}}, b{"b", "BF16", {5}, {}};
  for (int i = 0; i < 12; ++i) put<float>(a.data, static_cast<float>(rng() % 1000) / 7.0f);
  for (int i = 0; i < 5; ++i) put<uint16_t>(b.data, static_cast<uint16_t>(0x3F80 + rng() % 64));
  return safetensors_bytes({a, b});
}

std::string st_header(const std::string& entries) {
  return "{" + entries + "}";
}

TEST(Hostile, SafetensorsTable) {
  IO_SEED_TRACE();
  TempDir dir;
  const Bytes d48(48, 1);
  // A header of these entries over 48 bytes of data.
  auto with_d48 = [&](const std::string& entries) {
    return safetensors_bytes(st_header(entries), d48);
  };
  struct Case {
    const char* what;
    Bytes bytes;
    const char* must_name;  // the tensor the message names ("" when about the file)
  };
  Bytes len_beyond = safetensors_bytes(
      st_header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), Bytes(8, 0));
  len_beyond[0] = 0xFF;
  len_beyond[3] = 0x7F;
  const std::vector<Case> cases = {
      {"empty file", {}, ""},
      {"shorter than the length", {1, 2, 3}, ""},
      {"header length beyond the file", len_beyond, ""},
      {"invalid JSON", safetensors_bytes("{\"a\": {\"dtype\": ", d48), ""},
      {"JSON not an object", safetensors_bytes("[1, 2, 3]", d48), ""},
      {"overlapping offsets",
       with_d48(
           R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]})"),
       "b"},
      {"offsets out of range",
       with_d48(R"("a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]})"), "a"},
      {"unordered offsets", with_d48(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[16,8]})"),
       "a"},
      {"dtype/shape mismatch", with_d48(R"("a":{"dtype":"F64","shape":[4],"data_offsets":[0,16]})"),
       "a"},
      {"absurd shape",
       with_d48(R"("a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})"),
       "a"},
      {"shape overflowing 64 bits",
       with_d48(
           R"("a":{"dtype":"F32","shape":[65536,65536,65536,65536,65536],"data_offsets":[0,16]})"),
       "a"},
      {"negative dimension", with_d48(R"("a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]})"),
       "a"},
      {"unknown dtype", with_d48(R"("a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]})"), "a"},
      {"shape not integers", with_d48(R"("a":{"dtype":"F32","shape":["4"],"data_offsets":[0,16]})"),
       "a"},
      {"offsets not numbers", with_d48(R"("a":{"dtype":"F32","shape":[4],"data_offsets":"0-16"})"),
       "a"},
      {"negative offsets", with_d48(R"("a":{"dtype":"F32","shape":[4],"data_offsets":[-16,0]})"),
       "a"},
      {"entry not an object", with_d48(R"("a":7)"), "a"},
      {"dimension of 300 digits",
       with_d48(R"("a":{"dtype":"F32","shape":[2,3)" + std::string(300, '5') +
                R"(2],"data_offsets":[0,16]})"),
       "a"},
      {"dimension 1e300", with_d48(R"("a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,16]})"),
       "a"},
      {"offset past 2^64",
       with_d48(R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,36893488147419103232]})"), "a"},
      {"float dimension", with_d48(R"("a":{"dtype":"F32","shape":[4.5],"data_offsets":[0,16]})"),
       "a"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir / "h.safetensors";
    write_file(path, c.bytes);
    try {
      open_and_load(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
      if (*c.must_name)
        EXPECT_NE(msg.find(std::string("'") + c.must_name + "'"), std::string::npos)
            << "message does not name the tensor: " << msg;
    }
  }
}

TEST(Hostile, NpyAndGgufTable) {
  IO_SEED_TRACE();
  TempDir dir;
  const Bytes d16(16, 2);
  Bytes wrong_version = npy_bytes("<f4", {4}, false, d16);
  wrong_version[6] = 9;
  Bytes long_header = npy_bytes("<f4", {4}, false, d16);
  long_header[8] = 0xFF;
  long_header[9] = 0xFF;
  const std::vector<std::pair<std::string, Bytes>> npy = {
      {"bad magic", Bytes{'N', 'U', 'M', 'P', 'Y', 0, 1, 0, 0, 0, 0, 0}},
      {"unknown version", wrong_version},
      {"header length beyond the file", long_header},
      {"truncated data", npy_bytes("<f4", {5}, false, d16)},
      {"complex dtype", npy_bytes("<c8", {2}, false, d16)},
      {"object dtype", npy_bytes("|O", {2}, false, d16)},
      {"absurd shape", npy_bytes("<f4", {999999999999999, 99999999}, false, d16)},
  };
  for (const auto& [what, bytes] : npy) {
    SCOPED_TRACE("npy: " + what);
    write_file(dir / "h.npy", bytes);
    EXPECT_THROW(open_and_load(dir / "h.npy"), Error);
    EXPECT_THROW(io::load_npy(dir / "h.npy"), Error);
  }
  // Malformed dict literals.
  for (const std::string& h : std::vector<std::string>{
           "{'descr': '<f4', 'fortran_order': False}",
           "{'descr': '<f4' 'shape': (4,), 'fortran_order': False}",
           "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (4,",
           "{'descr: '<f4', 'fortran_order': False, 'shape': (4,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (a,)}", std::string(5000, '{')}) {
    SCOPED_TRACE("npy header: " + h.substr(0, 60));
    Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    put<uint16_t>(b, static_cast<uint16_t>(h.size()));
    put_bytes(b, h.data(), h.size());
    put_bytes(b, d16.data(), 16);
    write_file(dir / "h.npy", b);
    EXPECT_THROW(open_and_load(dir / "h.npy"), Error);
  }

  const GgufTensor good{"t", 0, {4}, d16};
  Bytes bad_version = gguf_bytes({good});
  bad_version[4] = 1;
  Bytes huge_count = gguf_bytes({good});
  huge_count[15] = 0x7F;  // tensor count
  Bytes huge_kv = gguf_bytes({good});
  huge_kv[23] = 0x7F;  // key-value count
  const std::vector<std::pair<std::string, Bytes>> gguf = {
      {"bad magic", Bytes{'G', 'G', 'U', 'X', 3, 0, 0, 0}},
      {"version 1", bad_version},
      {"absurd tensor count", huge_count},
      {"absurd key-value count", huge_kv},
      {"data past the end", gguf_bytes({GgufTensor{"t", 0, {400}, d16}})},
      {"absurd dimension", gguf_bytes({GgufTensor{"t", 0, {uint64_t{1} << 50, 4}, d16}})},
      {"Q8_0 row not a multiple of 32", gguf_bytes({GgufTensor{"t", 8, {20}, Bytes(34, 0)}})},
      {"product overflowing",
       gguf_bytes({GgufTensor{"t", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, d16}})},
  };
  for (const auto& [what, bytes] : gguf) {
    SCOPED_TRACE("gguf: " + what);
    write_file(dir / "h.gguf", bytes);
    EXPECT_THROW(open_and_load(dir / "h.gguf"), Error);
  }
  // A block type that neither CastScope nor gguf-py decodes (Q8_K, ggml's dot-product
  // intermediate) lists with its name and size but does not load; the error names the type.
  write_file(dir / "q8k.gguf", gguf_bytes({GgufTensor{"k", 15, {256}, Bytes(292, 0)}}));
  auto m = io::open_model(dir / "q8k.gguf");
  EXPECT_EQ(m->tensors()[0].dtype, "Q8_K");
  EXPECT_EQ(m->tensors()[0].nbytes, 292u);
  try {
    m->load("k");
    ADD_FAILURE() << "Q8_K loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_K (ggml type 15)"), std::string::npos) << e.what();
  }
  // An id outside ggml's table lists as ggml_type_<id>.
  write_file(dir / "q99.gguf", gguf_bytes({GgufTensor{"k", 99, {256}, Bytes(210, 0)}}));
  auto m99 = io::open_model(dir / "q99.gguf");
  EXPECT_EQ(m99->tensors()[0].dtype, "ggml_type_99");
  EXPECT_THROW(m99->load("k"), Error);
}

// Every prefix of a valid file is an error (the last tensor ends at the end of the file, so any
// cut loses data), except ONNX, where a cut between fields can still be a valid smaller model.
TEST(Hostile, TruncatedFilesAtManyCutPoints) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 30);
  TempDir dir;
  std::vector<std::pair<std::string, Bytes>> files;
  files.emplace_back("t.safetensors", valid_safetensors(rng));
  Bytes f(64 * 4);
  for (uint8_t& b : f) b = static_cast<uint8_t>(rng());
  files.emplace_back("t.npy", npy_bytes("<f4", {8, 8}, false, f));
  Bytes q(34 * 2);
  for (uint8_t& b : q) b = static_cast<uint8_t>(rng() & 0x3F);
  files.emplace_back("t.gguf",
                     gguf_bytes({GgufTensor{"x", 0, {8}, Bytes(f.begin(), f.begin() + 32)},
                                 GgufTensor{"q", 8, {64}, q}}));
#ifdef CASTSCOPE_TEST_LIBZIP
  {
    const std::string zp = dir / "src.npz";
    int err = 0;
    zip_t* z = zip_open(zp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    ASSERT_NE(z, nullptr);
    const Bytes member = npy_bytes("<f4", {8, 8}, false, f);
    zip_file_add(z, "a.npy", zip_source_buffer(z, member.data(), member.size(), 0), 0);
    zip_set_file_compression(z, 0, ZIP_CM_DEFLATE, 0);
    ASSERT_EQ(zip_close(z), 0);
    files.emplace_back("t.npz", read_file(zp));
  }
#endif
  for (const auto& [name, bytes] : files) {
    const std::string path = dir / name;
    write_file(path, bytes);
    ASSERT_TRUE(succeeds_or_errors(path)) << name << " must be valid before truncation";
    const size_t step = std::max<size_t>(1, bytes.size() / 200);
    for (size_t cut = 0; cut < bytes.size(); cut += (cut < 64 ? 1 : step)) {
      SCOPED_TRACE(name + " cut at " + std::to_string(cut));
      write_file(path, Bytes(bytes.begin(), bytes.begin() + static_cast<int64_t>(cut)));
      EXPECT_FALSE(succeeds_or_errors(path));
    }
  }
#ifdef CASTSCOPE_HAVE_ONNX
  onnx::ModelProto m;
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto_DataType_FLOAT);
  t->add_dims(64);
  t->set_raw_data(std::string(f.begin(), f.end()));
  std::string s;
  m.SerializeToString(&s);
  const std::string path = dir / "t.onnx";
  for (size_t cut = 0; cut < s.size(); cut += 3) {
    SCOPED_TRACE("onnx cut at " + std::to_string(cut));
    write_file(path, Bytes(s.begin(), s.begin() + static_cast<int64_t>(cut)));
    succeeds_or_errors(path);  // must not crash or throw anything but Error
  }
  write_file(path, Bytes{0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x12, 0x34});
  EXPECT_THROW(open_and_load(path), Error);
#endif
  // Packed loader on truncated packed files.
  std::normal_distribution<float> nd;
  Tensor x = Tensor::empty(DType::F32, {2, 32});
  for (int i = 0; i < 64; ++i) x.mutable_ptr<float>()[i] = nd(rng);
  const std::string pp = dir / "p.safetensors";
  const Bytes pb = save_packed_w(pp, x, "nvfp4");
  for (size_t cut = 0; cut < pb.size(); cut += 5) {
    SCOPED_TRACE("packed cut at " + std::to_string(cut));
    write_file(pp, Bytes(pb.begin(), pb.begin() + static_cast<int64_t>(cut)));
    EXPECT_THROW(io::load_packed(pp), Error);
  }
}

TEST(Hostile, MissingAndUnknownPaths) {
  TempDir dir;
  EXPECT_THROW(io::open_model(dir / "nothing.safetensors"), Error);
  EXPECT_THROW(io::open_model(dir.path().string()), Error);  // empty directory
  write_file(dir / "x.txt", Bytes{1, 2, 3});
  EXPECT_THROW(io::open_model(dir / "x.txt"), Error);
  const std::string idx = R"({"weight_map": {"a": "../../etc/passwd"}})";
  write_file(dir / "m.safetensors.index.json", Bytes(idx.begin(), idx.end()));
  EXPECT_THROW(io::open_model(dir / "m.safetensors.index.json"), Error);
  write_file(dir / "n.safetensors.index.json", Bytes{'{', '"'});
  EXPECT_THROW(io::open_model(dir / "n.safetensors.index.json"), Error);
#ifndef CASTSCOPE_TEST_LIBZIP
  write_file(dir / "z.npz", Bytes{'P', 'K', 3, 4});
  EXPECT_THROW(io::open_model(dir / "z.npz"), Error);
#endif
}

}  // namespace
}  // namespace castscope::iotest
