// Quantized checkpoints (engine/src/io/quantized/): hostile variants are refused with the tensor's
// name, and a checkpoint folds the same whether it is one file, a directory or sharded. Values
// against the producers' own code are tests/interop/test_quantized_sources.py.
#include "io_test_util.hpp"

namespace castscope::iotest {
namespace {

void write_text(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::trunc);
  f << s;
}

Bytes random_bytes(std::mt19937_64& rng, size_t n) {
  Bytes b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

Bytes f32_bytes(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  Bytes b;
  for (size_t i = 0; i < n; ++i) put<float>(b, u(rng));
  return b;
}

// FP8 codes without NaN (0x7F / 0xFF) so loads stay finite.
Bytes fp8_bytes(std::mt19937_64& rng, size_t n) {
  Bytes b = random_bytes(rng, n);
  for (uint8_t& x : b)
    if ((x & 0x7F) == 0x7F) x &= 0xFE;
  return b;
}

const char* kFp8Config =
    R"({"model_type":"llama","quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}})";

std::string ct_config(const std::string& format, const std::string& weights) {
  return R"({"model_type":"llama","quantization_config":{"quant_method":"compressed-tensors","format":")" +
         format + R"(","config_groups":{"group_0":{"targets":["Linear"],"weights":)" + weights +
         "}}}}";
}

// The message of the Error that opening and loading everything in `path` gives ("" if none).
std::string open_error(const std::string& path) {
  try {
    auto m = io::open_model(path);
    for (const io::TensorInfo& t : m->tensors()) m->load(t.name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Quantized, HostileVariantsNameTheTensor) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed());
  struct Case {
    const char* what;
    std::string config;
    std::vector<StTensor> tensors;
    const char* must_name;
  };
  const std::string w = "model.layers.0.mlp.down_proj";
  Bytes gidx;
  for (int i = 0; i < 64; ++i) put<int32_t>(gidx, i == 37 ? 9 : i / 32);  // 2 groups; 9 is outside
  Bytes shape64;
  put<int64_t>(shape64, 8);
  put<int64_t>(shape64, 64);
  const std::string int4_group =
      R"({"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":32})";
  const std::vector<Case> cases = {
      {"block-FP8 scale that does not tile the weight",
       kFp8Config,
       {{w + ".weight", "F8_E4M3", {256, 200}, fp8_bytes(rng, 256 * 200)},
        {w + ".weight_scale_inv", "F32", {2, 1}, f32_bytes(rng, 2, 0.01f, 1)}},
       "weight_scale_inv"},
      {"FP8 weight without its scale",
       kFp8Config,
       {{w + ".weight", "F8_E4M3", {128, 128}, fp8_bytes(rng, 128 * 128)}},
       "down_proj.weight"},
      {"g_idx naming a group that does not exist",
       ct_config("pack-quantized", int4_group),
       {{w + ".weight_packed", "I32", {8, 8}, random_bytes(rng, 8 * 8 * 4)},
        {w + ".weight_scale", "BF16", {8, 2}, random_bytes(rng, 8 * 2 * 2)},
        {w + ".weight_shape", "I64", {2}, shape64},
        {w + ".weight_g_idx", "I32", {64}, gidx}},
       "weight_g_idx"},
      {"packed length that disagrees with weight_shape",
       ct_config("pack-quantized", int4_group),
       {{w + ".weight_packed", "I32", {8, 5}, random_bytes(rng, 8 * 5 * 4)},
        {w + ".weight_scale", "BF16", {8, 2}, random_bytes(rng, 8 * 2 * 2)},
        {w + ".weight_shape", "I64", {2}, shape64}},
       "weight_packed"},
      {"NVFP4 without its global scale",
       ct_config("nvfp4-pack-quantized",
                 R"({"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16})"),
       {{w + ".weight_packed", "U8", {4, 16}, random_bytes(rng, 64)},
        {w + ".weight_scale", "F8_E4M3", {4, 2}, fp8_bytes(rng, 8)}},
       "weight_global_scale"},
      {"group scale of the wrong width",
       ct_config("pack-quantized", int4_group),
       {{w + ".weight_packed", "I32", {8, 8}, random_bytes(rng, 8 * 8 * 4)},
        {w + ".weight_scale", "BF16", {8, 3}, random_bytes(rng, 8 * 3 * 2)},
        {w + ".weight_shape", "I64", {2}, shape64}},
       "weight_scale"},
      {"a quantization_config naming an unknown method",
       R"({"quantization_config":{"quant_method":"zipquant"}})",
       {{w + ".weight", "U8", {4, 4}, random_bytes(rng, 16)}},
       "zipquant"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_text(dir / "config.json", c.config);
    write_file(dir / "model.safetensors", safetensors_bytes(c.tensors));
    const std::string err = open_error(dir.path().string());
    EXPECT_NE(err, "") << "accepted";
    EXPECT_NE(err.find(c.must_name), std::string::npos) << err;
    if (std::getenv("CASTSCOPE_TEST_VERBOSE")) std::printf("%s: %s\n", c.what, err.c_str());
  }
}

// One CT NVFP4 weight whose companions lie in another shard folds as in a single file.
TEST(Quantized, ShardedIndexFoldsAcrossFiles) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed());
  const std::string w = "model.layers.0.self_attn.q_proj";
  Bytes gs;
  put<float>(gs, 448.0f * 6.0f / 0.37f);
  const StTensor packed{w + ".weight_packed", "U8", {32, 32}, random_bytes(rng, 32 * 32)};
  const StTensor scale{w + ".weight_scale", "F8_E4M3", {32, 4}, fp8_bytes(rng, 32 * 4)};
  const StTensor global{w + ".weight_global_scale", "F32", {1}, gs};
  const StTensor norm{"model.norm.weight", "F32", {64}, f32_bytes(rng, 64, -1, 1)};
  const std::string cfg =
      ct_config("nvfp4-pack-quantized",
                R"({"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16})");
  TempDir one, sharded;
  write_text(one / "config.json", cfg);
  write_file(one / "model.safetensors", safetensors_bytes({packed, norm, scale, global}));
  write_text(sharded / "config.json", cfg);
  write_file(sharded / "a.safetensors", safetensors_bytes({packed, norm}));
  write_file(sharded / "b.safetensors", safetensors_bytes({scale, global}));
  write_text(sharded / "model.safetensors.index.json",
             R"({"weight_map":{")" + packed.name +
                 R"(":"a.safetensors","model.norm.weight":"a.safetensors",")" + scale.name +
                 R"(":"b.safetensors",")" + global.name + R"(":"b.safetensors"}})");
  auto a = io::open_model(one / "model.safetensors");
  auto b = io::open_model(sharded / "model.safetensors.index.json");
  auto c = io::open_model(sharded.path().string());
  for (io::Model* m : {a.get(), b.get(), c.get()}) {
    ASSERT_EQ(m->tensors().size(), 2u) << m->path();
    const io::TensorInfo* t = m->find(w + ".weight");
    ASSERT_NE(t, nullptr) << m->path();
    EXPECT_EQ(t->shape, (Shape{32, 64}));
    EXPECT_EQ(t->stored.convention, "compressed-tensors nvfp4-pack-quantized");
    EXPECT_EQ(t->stored.datatype, "nvfp4");
    EXPECT_EQ(t->stored.stored_bytes, 32u * 32 + 32 * 4 + 4);
    EXPECT_DOUBLE_EQ(t->stored.bits_per_weight, 8.0 * (32 * 32 + 32 * 4 + 4) / (32 * 64));
    EXPECT_EQ(t->layout.layout, "linear [out, in]");
    EXPECT_THROW(m->load_raw(w + ".weight"), Error);
  }
  const Tensor x = a->load(w + ".weight"), y = b->load(w + ".weight"), z = c->load(w + ".weight");
  ASSERT_EQ(x.nbytes(), y.nbytes());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0);
  EXPECT_EQ(std::memcmp(x.data(), z.data(), x.nbytes()), 0);
  // Not all zero: random codes and scales give values of both signs.
  bool pos = false, neg = false;
  for (int64_t i = 0; i < x.numel(); ++i) {
    pos |= x.ptr<float>()[i] > 0;
    neg |= x.ptr<float>()[i] < 0;
  }
  EXPECT_TRUE(pos && neg);
}

}  // namespace
}  // namespace castscope::iotest
