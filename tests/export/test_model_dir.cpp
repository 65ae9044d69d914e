// Model-directory exports (docs/export-formats.md, "Model directories"), the MXFP8 / MXFP6
// compressed-tensors schemes decoded from the document, and per-layer auto-assignment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/autoplan.hpp"
#include "castscope/storage_bits.hpp"
#include "castscope/export.hpp"
#include "export_test_util.hpp"
#include "castscope/metrics.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using exporttest::fresh_seed;

Tensor random_tensor(Shape shape, std::mt19937_64& rng) {
  return exporttest::spread_tensor(shape, rng, 4);
}

std::string slurp_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

struct TempDir : exporttest::ScratchDir {
  TempDir() : ScratchDir("castscope_modeldir_") {}
  bool has_staged() const {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().find(".staged") != std::string::npos) return true;
    return false;
  }
};

// A sharded source: two shards, an index, config.json, tokenizer files and a sub-folder.
struct Source {
  fs::path dir;
  std::map<std::string, Tensor> tensors;
  Source(const fs::path& root, std::mt19937_64& rng) : dir(root / "src") {
    fs::create_directories(dir / "extra");
    tensors["model.layers.0.mlp.up_proj.weight"] = random_tensor({64, 128}, rng);
    tensors["model.layers.0.input_layernorm.weight"] = random_tensor({128}, rng);
    tensors["model.layers.1.mlp.down_proj.weight"] = random_tensor({128, 64}, rng);
    tensors["lm_head.weight"] = random_tensor({32, 128}, rng);
    save_safetensors(
        (dir / "model-00001-of-00002.safetensors").string(),
        {{"model.layers.0.mlp.up_proj.weight", tensors["model.layers.0.mlp.up_proj.weight"]},
         {"model.layers.0.input_layernorm.weight",
          tensors["model.layers.0.input_layernorm.weight"]}},
        {});
    save_safetensors(
        (dir / "model-00002-of-00002.safetensors").string(),
        {{"model.layers.1.mlp.down_proj.weight", tensors["model.layers.1.mlp.down_proj.weight"]},
         {"lm_head.weight", tensors["lm_head.weight"]}},
        {});
    json wm = json::object();
    for (const auto& [n, t] : tensors)
      wm[n] = n.find("layers.0") != std::string::npos ? "model-00001-of-00002.safetensors"
                                                      : "model-00002-of-00002.safetensors";
    spit(dir / "model.safetensors.index.json",
         json({{"metadata", {{"total_size", 1}}}, {"weight_map", wm}}).dump());
    spit(dir / "config.json",
         R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "vocab_size": 32})");
    spit(dir / "tokenizer.json", R"({"version": "1.0", "model": {"type": "WordLevel"}})");
    spit(dir / "tokenizer_config.json", R"({"bos_token": "<s>"})");
    spit(dir / "extra" / "chat_template.jinja", "{{ messages }}");
  }
};

ExportOptions ct_options() {
  ExportOptions o;
  o.layout = Layout::CompressedTensors;
  o.cast.device = Device::CPU;
  return o;
}

TEST(ModelDirectory, KeepsFilesShardsIndexAndConfig) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir tmp;
  Source src(tmp.dir, rng);
  const std::string out = (tmp.dir / "out").string();
  for (const std::string from :
       {src.dir.string(), (src.dir / "model.safetensors.index.json").string()}) {
    fs::remove_all(out);
    const auto model = io::open_model(from);
    // "OUT/" names the same new directory.
    const std::string target = from == src.dir.string() ? out : out + "/";
    const ExportReport rep = export_model(*model, target, plan_for_dtype("nvfp4"), ct_options());
    EXPECT_EQ(rep.directory, out);
    EXPECT_FALSE(tmp.has_staged());
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "extra/chat_template.jinja"})
      EXPECT_EQ(slurp_file(fs::path(out) / f), slurp_file(src.dir / f)) << f;
    const json cfg = json::parse(slurp_file(fs::path(out) / "config.json"));
    EXPECT_EQ(cfg.at("hidden_size"), 128);
    EXPECT_EQ(cfg.at("architectures")[0], "LlamaForCausalLM");
    EXPECT_EQ(cfg.at("quantization_config").at("format"), "nvfp4-pack-quantized");
    const json idx = json::parse(slurp_file(fs::path(out) / "model.safetensors.index.json"));
    const json& wm = idx.at("weight_map");
    EXPECT_EQ(wm.at("model.layers.0.mlp.up_proj.weight_packed"),
              "model-00001-of-00002.safetensors");
    EXPECT_EQ(wm.at("lm_head.weight_global_scale"), "model-00002-of-00002.safetensors");
    EXPECT_EQ(wm.at("model.layers.0.input_layernorm.weight"), "model-00001-of-00002.safetensors");
    // The index lists exactly what the shards hold, and the result opens as a model.
    // (Its NVFP4 weights read back as logical weights, each made of its file tensors.)
    const auto back = io::open_model(out);
    size_t file_tensors = 0;
    for (const io::TensorInfo& t : back->tensors())
      file_tensors += t.stored.empty() ? 1 : t.stored.parts.size();
    EXPECT_EQ(file_tensors, wm.size());
    uint64_t total = 0;
    for (const io::TensorInfo& t : back->tensors()) total += t.nbytes;
    EXPECT_EQ(idx.at("metadata").at("total_size").get<uint64_t>(), total);
    const Tensor norm = back->load("model.layers.0.input_layernorm.weight");
    EXPECT_EQ(std::memcmp(norm.data(), src.tensors["model.layers.0.input_layernorm.weight"].data(),
                          norm.nbytes()),
              0);
  }
}

// A Hugging Face cache snapshot: every file a symbolic link into a blob store. The output holds
// real files.
TEST(ModelDirectory, SnapshotOfSymbolicLinks) {
  std::mt19937_64 rng(fresh_seed());
  TempDir tmp;
  Source src(tmp.dir, rng);
  const fs::path snap = tmp.dir / "snapshot";
  fs::create_directories(snap);
  for (const auto& e : fs::directory_iterator(src.dir))
    if (e.is_regular_file()) fs::create_symlink(e.path(), snap / e.path().filename());
  const auto model = io::open_model(snap.string());
  const std::string out = (tmp.dir / "out").string();
  export_model(*model, out, plan_for_dtype("mxfp8e4"), ct_options());
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_FALSE(fs::is_symlink(e.path())) << e.path();
    EXPECT_TRUE(fs::is_regular_file(e.path())) << e.path();
  }
  EXPECT_EQ(slurp_file(fs::path(out) / "tokenizer.json"), slurp_file(src.dir / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "model-00002-of-00002.safetensors"));
  EXPECT_EQ(
      json::parse(slurp_file(fs::path(out) / "config.json")).at("quantization_config").at("format"),
      "mxfp8-quantized");
  EXPECT_TRUE(fs::is_symlink(snap / "config.json")) << "the source is never modified";
}

TEST(ModelDirectory, FailureAndCancelLeaveNothing) {
  std::mt19937_64 rng(fresh_seed());
  TempDir tmp;
  Source src(tmp.dir, rng);
  const auto model = io::open_model(src.dir.string());
  const std::string out = (tmp.dir / "out").string();
  EXPECT_THROW(export_model(*model, out, plan_for_dtype("int8_float32_t0"), ct_options()), Error);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(tmp.has_staged());
  JobControl job;
  job.cancel = true;
  EXPECT_THROW(export_model(*model, out, plan_for_dtype("nvfp4"), ct_options(), &job), Cancelled);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(tmp.has_staged());
  // OUT named *.safetensors, or an existing directory, keeps the single-file behaviour.
  export_model(*model, out + ".safetensors", plan_for_dtype("nvfp4"), ct_options());
  EXPECT_TRUE(fs::is_regular_file(out + ".safetensors"));
  fs::create_directory(out);
  export_model(*model, out + "/model.safetensors", plan_for_dtype("nvfp4"), ct_options());
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(out + "/tokenizer.json"));
}

TEST(ModelDirectory, GptOssConfigKeys) {
  std::mt19937_64 rng(fresh_seed());
  TempDir tmp;
  Source src(tmp.dir, rng);
  const auto model = io::open_model(src.dir.string());
  ExportOptions o;
  o.layout = Layout::GptOss;
  o.cast.device = Device::CPU;
  const std::string out = (tmp.dir / "out").string();
  ExportPlan plan = parse_plan(R"({"rules": [{"pattern": "*.mlp.*", "dtype": "mxfp4e2"}]})");
  export_model(*model, out, plan, o);
  const json cfg = json::parse(slurp_file(fs::path(out) / "config.json"));
  EXPECT_EQ(cfg.at("quantization_config").at("quant_method"), "mxfp4");
  EXPECT_EQ(cfg.at("quantization_config").at("modules_to_not_convert"), json({"lm_head"}));
  EXPECT_EQ(cfg.at("vocab_size"), 32);
}

// MXFP8 and MXFP6 decoded from docs/export-formats.md alone equal the virtual cast.
TEST(CompressedTensors, Mxfp8AndMxfp6) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const Tensor w = random_tensor({16, 96}, rng);
  MemoryModel m;
  m.add("layer.weight", w);
  for (const char* dtype : {"mxfp8e4", "mxfp6e2", "e2m3_e8m0_t32"}) {
    const std::string out = (tmp.dir / (std::string(dtype) + ".safetensors")).string();
    ExportOptions o = ct_options();
    o.config_path = (tmp.dir / (std::string(dtype) + ".json")).string();
    export_model(m, out, plan_for_dtype(dtype), o);
    const json qc = json::parse(slurp_file(o.config_path)).at("quantization_config");
    const bool fp8 = std::string(dtype) == "mxfp8e4";
    EXPECT_EQ(qc.at("format"), fp8 ? "mxfp8-quantized" : "mxfp6-pack-quantized");
    const auto f = io::open_model(out);
    const Tensor scale = f->load_raw("layer.weight_scale");
    ASSERT_EQ(scale.dtype(), DType::U8);
    ASSERT_EQ(scale.shape(), (Shape{16, 3}));
    std::vector<float> got(w.numel());
    if (fp8) {
      const Tensor q = f->load("layer.weight");
      for (int64_t i = 0; i < w.numel(); ++i)
        got[i] = q.ptr<float>()[i] *
                 std::ldexp(1.0f, int(scale.ptr<uint8_t>()[(i / 96) * 3 + (i % 96) / 32]) - 127);
    } else {
      const Tensor p = f->load_raw("layer.weight_packed");
      ASSERT_EQ(p.shape(), (Shape{16, 72}));
      const uint8_t* b = p.ptr<uint8_t>();
      for (int64_t i = 0; i < w.numel(); ++i) {
        const int64_t g = i / 4, k = i % 4;
        const uint32_t word = b[3 * g] | b[3 * g + 1] << 8 | b[3 * g + 2] << 16;
        const uint32_t c = (word >> (6 * k)) & 0x3F, e = (c >> 3) & 3, mant = c & 7;
        const float mag = e == 0 ? mant / 8.0f : std::ldexp(1.0f + mant / 8.0f, int(e) - 1);
        got[i] = ((c & 0x20) ? -mag : mag) *
                 std::ldexp(1.0f, int(scale.ptr<uint8_t>()[(i / 96) * 3 + (i % 96) / 32]) - 127);
      }
    }
    CastOptions co;
    co.device = Device::CPU;
    const Tensor want = cast(w, DataType::parse(dtype), co).values;
    for (int64_t i = 0; i < w.numel(); ++i)
      ASSERT_EQ(got[i], want.ptr<float>()[i]) << dtype << " element " << i << " seed " << seed;
  }
  // MXFP6 needs whole groups of 32 along a 2-D weight's last axis.
  MemoryModel bad;
  bad.add("x.weight", random_tensor({4, 40}, rng));
  ExportOptions o = ct_options();
  o.config_path = (tmp.dir / "bad.json").string();
  EXPECT_THROW(
      export_model(bad, (tmp.dir / "bad.safetensors").string(), plan_for_dtype("mxfp6e2"), o),
      Error);
}

TEST(AutoAssign, CandidatesAndWhatItKeeps) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  m.add("model.embed_tokens.weight", random_tensor({32, 64}, rng));
  m.add("model.layers.0.mlp.up_proj.weight", random_tensor({64, 64}, rng));
  m.add("model.layers.0.input_layernorm.weight", random_tensor({64}, rng));
  m.add("conv.weight", random_tensor({8, 4, 3, 3}, rng));  // a kernel axis of 3: partial tiles
  AutoPlanOptions o;
  o.cast.device = Device::CPU;
  o.snr_target_db = 25;
  std::vector<AutoPlanPick> picks = auto_assign(m, o);
  ASSERT_EQ(picks.size(), 2u) << "1-D tensors and embeddings are kept by default";
  for (const AutoPlanPick& p : picks) {
    ASSERT_FALSE(p.dtype.empty()) << p.tensor;
    EXPECT_TRUE(p.met) << p.tensor << " " << p.snr_db;
    EXPECT_NE(
        std::find(default_auto_candidates().begin(), default_auto_candidates().end(), p.dtype),
        default_auto_candidates().end())
        << p.dtype;
    // Every cheaper candidate misses the target: the pick is the cheapest that meets it.
    const Tensor x = m.load(p.tensor);
    for (const std::string& c : default_auto_candidates()) {
      const DataType d = DataType::parse(c);
      // Cheaper on this tensor: its exact storage along the axis the pick was cast on.
      CastOptions co;
      co.device = Device::CPU;
      AxisSpec::parse(p.axis).apply(co);
      if (static_cast<double>(storage_bits(d, x.shape(), co)) / x.numel() >= p.bits) continue;
      const double snr = compute_stats(x, cast(x, d, co).values).snr_db;
      EXPECT_LT(snr, o.snr_target_db)
          << p.tensor << ": " << c << " is cheaper (seed " << seed << ")";
    }
  }
  o.include_1d = o.include_embeddings = true;
  o.candidates = {"mxfp4e2", "bfloat16"};
  picks = auto_assign(m, o);
  EXPECT_EQ(picks.size(), 4u);
  for (const AutoPlanPick& p : picks)
    EXPECT_TRUE(p.dtype == "bfloat16" || p.dtype == "mxfp4e2") << p.dtype;
  const ExportPlan plan = plan_from_picks(picks);
  EXPECT_EQ(plan.rules.size(), 4u);
  EXPECT_FALSE(plan.default_dtype.has_value());
  o.candidates = {"mxfp4e2", "no_such_type"};
  try {
    auto_assign(m, o);
    ADD_FAILURE() << "a bad candidate must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_type"), std::string::npos) << e.what();
  }
}

}  // namespace
