#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/codebook.hpp"
#include "castscope/export.hpp"
#include "export_test_util.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

using exporttest::fresh_seed;

// Values with a spread of magnitudes so that tiles get different scales; a few exact zeros.
Tensor random_tensor(Shape shape, std::mt19937_64& rng) {
  return exporttest::spread_tensor(shape, rng, 6, 41);
}

Tensor virtual_values(const Tensor& x, const std::string& dtype) {
  CastOptions o;
  o.device = Device::CPU;
  return cast(x, DataType::parse(dtype), o).values;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Bit-exact comparison (NaNs compare equal to NaNs).
::testing::AssertionResult same_bits(const float* a, const float* b, int64_t n,
                                     const std::string& what, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i)
    if (bits(a[i]) != bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i])))
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << a[i]
                                           << ", expected " << b[i] << " (seed " << seed << ")";
  return ::testing::AssertionSuccess();
}

struct TempDir : exporttest::ScratchDir {
  TempDir() : ScratchDir("castscope_export_") {}
  size_t count() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
};

ExportPlan plan_of(const std::vector<std::pair<std::string, std::string>>& rules) {
  nlohmann::json j = {{"default", "keep"}, {"rules", nlohmann::json::array()}};
  for (const auto& [p, d] : rules) j["rules"].push_back({{"pattern", p}, {"dtype", d}});
  return parse_plan(j.dump(), "test-plan.json");
}

// ---------------------------------------------------------------------------------------------

TEST(ExportNative, RoundTripEveryFamily) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const std::vector<std::pair<std::string, std::string>> types = {
      {"t.mxfp4", "mxfp4e2"},
      {"t.mxfp8", "mxfp8e4"},
      {"t.nvfp4", "nvfp4"},
      {"t.int8sc", "int8_sc"},
      {"t.uint4", "uint4_fi32"},
      {"t.mx9", "mx9"},
      {"t.mx4", "mx4"},
      {"t.sparse", "e4m3fn_e8m0_t32n2m4"},
      {"t.sparse4", "e2m1fnuz_e8m0_t32n2m4"},
      {"t.mxint4", "mxint4"},
      {"t.tcfp12", "tcfp12"},
      {"t.fp8blk", "fp8e4_block128"},
      {"t.uint8ff", "uint8_ssc"}};
  MemoryModel m;
  std::map<std::string, Tensor> xs;
  for (const auto& [name, d] : types) {
    xs[name] = random_tensor(name == "t.fp8blk" ? Shape{256, 160} : Shape{24, 96}, rng);
    m.add(name, xs[name]);
  }
  xs["kept.f32"] = random_tensor({7, 5}, rng);
  m.add("kept.f32", xs["kept.f32"]);
  CastOptions bo;
  bo.mode = CastMode::Actual;
  const Tensor bf =
      cast(random_tensor({33}, rng), DataType::parse("bfloat16"), bo).codes;  // BF16 storage
  m.add("kept.bf16", bf);
  std::vector<std::pair<std::string, std::string>> rules;
  for (const auto& [name, d] : types) rules.push_back({name, d});
  TempDir tmp;
  const std::string out = tmp / "native.safetensors";
  ExportOptions opt;
  opt.cast.device = Device::CPU;
  export_model(m, out, plan_of(rules), opt);
  const auto back = io::load_packed(out);
  std::map<std::string, const CastResult*> by;
  for (const auto& p : back) by[p.name] = &p.result;
  for (const auto& [name, d] : types) {
    ASSERT_TRUE(by.count(name)) << name;
    EXPECT_EQ(by[name]->dtype, DataType::parse(d)) << name;
    const Tensor got = upcast(*by[name]);
    const Tensor want = virtual_values(xs[name], d);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    EXPECT_TRUE(
        same_bits(got.ptr<float>(), want.ptr<float>(), got.numel(), name + " as " + d, seed));
  }
  ASSERT_TRUE(by.count("kept.f32"));
  EXPECT_TRUE(same_bits(upcast(*by["kept.f32"]).ptr<float>(), xs["kept.f32"].ptr<float>(), 35,
                        "kept f32", seed));
  ASSERT_TRUE(by.count("kept.bf16"));
  EXPECT_EQ(by["kept.bf16"]->codes.dtype(), DType::BF16);
  EXPECT_EQ(std::memcmp(by["kept.bf16"]->codes.data(), bf.data(), bf.nbytes()), 0)
      << "seed " << seed;
  // The packed layout itself, as docs/export-formats.md describes it.
  const auto st = exporttest::read_st(out);
  EXPECT_EQ(st.metadata.at("format"), "castscope-packed");
  EXPECT_EQ(st.tensors.at("t.mxfp4").shape, (std::vector<int64_t>{24, 48}));
  EXPECT_EQ(st.tensors.at("t.mxfp4.scale").shape, (std::vector<int64_t>{24, 3}));
  EXPECT_EQ(st.tensors.at("t.sparse").shape, (std::vector<int64_t>{24, 48}));       // 2 of 4 kept
  EXPECT_EQ(st.tensors.at("t.sparse.mask").shape, (std::vector<int64_t>{24, 12}));  // 8 per byte
  EXPECT_EQ(st.tensors.at("t.sparse4").shape,
            (std::vector<int64_t>{24, 24}));  // kept, then 2 per byte
  EXPECT_EQ(st.tensors.at("t.mx9.meta").shape, (std::vector<int64_t>{24, 6}));  // 48 pair bits
  // 3-bit codes back to back (the dense layout of version 4): 24 · 96 · 3 / 8 bytes.
  EXPECT_EQ(st.tensors.at("t.mx4").shape, (std::vector<int64_t>{864}));
  EXPECT_EQ(st.metadata.at("castscope.version"), "4");
  EXPECT_EQ(st.tensors.at("t.nvfp4.tenscale").dtype, "F32");
  EXPECT_EQ(st.tensors.at("t.uint4.zero").dtype, "I8");
}

// A generic codebook's tables travel in the model export's metadata, as in every packed file
// (docs/export-formats.md), so the file decodes without the table file.
TEST(ExportNative, GenericCodebookTablesTravelWithTheModel) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::string table = tmp / "cb_table.json";
  {
    std::ofstream f(table);
    f << R"({"codebook": "cb31_e3m2fnuz_pk", "mappings": [
        [-28,-16,-8,-0.0,0,8,16,28], [-12,-6,-3,-0.0,0,3,6,12]], "names": ["wide", "narrow"]})";
  }
  load_codebook_file(table);
  const std::string d = "cb31_e3m2fnuz_pk_e8m0_t16s4";
  MemoryModel m;
  const Tensor x = random_tensor({12, 64}, rng);
  m.add("t.cb", x);
  TempDir out_dir;
  const std::string out = out_dir / "cb.safetensors";
  ExportOptions opt;
  opt.cast.device = Device::CPU;
  export_model(m, out, plan_of({{"t.cb", d}}), opt);
  const auto st = exporttest::read_st(out);
  ASSERT_TRUE(st.metadata.count("t.cb.codebook")) << "no codebook tables in the metadata";
  const auto t = nlohmann::json::parse(st.metadata.at("t.cb.codebook"));
  EXPECT_EQ(t["codebook"], "cb31_e3m2fnuz_pk");
  EXPECT_EQ(t["mappings"][1][7].get<double>(), 12.0);
  const auto back = io::load_packed(out);
  ASSERT_EQ(back.size(), 1u);
  const Tensor got = upcast(back[0].result);
  EXPECT_TRUE(same_bits(got.ptr<float>(), virtual_values(x, d).ptr<float>(), x.numel(), d, seed));
}

TEST(ExportNative, InMemoryExportVerifies) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir tmp;
  CastOptions o;
  o.mode = CastMode::Compress;
  o.device = Device::CPU;
  const Tensor x = random_tensor({8, 64}, rng);
  export_packed(tmp / "p.safetensors", {{"w", cast(x, DataType::parse("mxfp6e3"), o)}});
  const auto back = io::load_packed(tmp / "p.safetensors");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(same_bits(upcast(back[0].result).ptr<float>(),
                        virtual_values(x, "mxfp6e3").ptr<float>(), x.numel(), "mxfp6e3", seed));
}

// The export's overflow choice reaches its casts and the packed metadata: saturating clamps Inf
// and values beyond the range to the largest finite value, IEEE keeps them Inf.
TEST(ExportNative, OverflowGoesToTheCasts) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  Tensor x = random_tensor({4, 32}, rng);
  x.mutable_ptr<float>()[0] = std::numeric_limits<float>::infinity();
  x.mutable_ptr<float>()[1] = -std::numeric_limits<float>::infinity();
  x.mutable_ptr<float>()[2] = 1e6f;  // beyond float16
  m.add("w", x);
  TempDir tmp;
  for (const Overflow ov : {Overflow::Saturate, Overflow::IEEE}) {
    SCOPED_TRACE(to_string(ov));
    ExportOptions eo;
    eo.cast.device = Device::CPU;
    eo.cast.overflow = ov;
    const std::string out = tmp / (std::string(to_string(ov)) + ".safetensors");
    export_model(m, out, plan_of({{"w", "float16"}}), eo);
    EXPECT_EQ(exporttest::read_st(out).metadata.at("w.overflow"), to_string(ov));
    const auto back = io::load_packed(out);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].result.options.overflow, ov);
    const Tensor u = upcast(back[0].result);
    const float big = ov == Overflow::IEEE ? std::numeric_limits<float>::infinity() : 65504.0f;
    EXPECT_EQ(u.ptr<float>()[0], big);
    EXPECT_EQ(u.ptr<float>()[1], -big);
    EXPECT_EQ(u.ptr<float>()[2], big);
  }
}

TEST(ExportGptOss, BlocksAndScalesDecode) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  const Tensor w = random_tensor({3, 16, 64}, rng), b = random_tensor({16}, rng);
  m.add("block.0.mlp.mlp1_weight", w);
  m.add("block.0.mlp.mlp1_bias", b);
  TempDir tmp;
  export_model(m, tmp / "o.safetensors", plan_of({{"*weight", "mxfp4e2"}}),
               ExportOptions{Layout::GptOss});
  const auto st = exporttest::read_st(tmp / "o.safetensors");
  const auto& bl = st.tensors.at("block.0.mlp.mlp1_weight_blocks");
  const auto& sc = st.tensors.at("block.0.mlp.mlp1_weight_scales");
  EXPECT_EQ(bl.dtype, "U8");
  EXPECT_EQ(bl.shape, (std::vector<int64_t>{3, 16, 2, 16}));
  EXPECT_EQ(sc.shape, (std::vector<int64_t>{3, 16, 2}));
  EXPECT_EQ(st.tensors.at("block.0.mlp.mlp1_bias").dtype, "F32");
  std::vector<float> dec(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    const uint8_t byte = bl.as<uint8_t>()[i / 2];
    const uint8_t code = i % 2 ? byte >> 4 : byte & 0xF;
    dec[static_cast<size_t>(i)] = static_cast<float>(
        exporttest::e2m1(code) * std::ldexp(1.0, sc.as<uint8_t>()[i / 32] - 127));
  }
  EXPECT_TRUE(same_bits(dec.data(), virtual_values(w, "mxfp4e2").ptr<float>(), w.numel(),
                        "gpt-oss mxfp4", seed));
}

TEST(ExportCompressedTensors, Fp8Nvfp4Mxfp4Decode) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  const std::vector<std::pair<std::string, std::string>> types = {
      {"l.fp8t.weight", "fp8e4_tensor"},
      {"l.fp8c.weight", "fp8e4_channel"},
      {"l.fp8b.weight", "fp8e4_block128"},
      {"l.nv.weight", "nvfp4"},
      {"l.mx.weight", "mxfp4e2"}};
  std::map<std::string, Tensor> xs;
  for (const auto& [n, d] : types) {
    xs[n] = random_tensor(n == "l.fp8b.weight" ? Shape{200, 256} : Shape{40, 128}, rng);
    m.add(n, xs[n]);
  }
  m.add("norm.weight", random_tensor({128}, rng));
  TempDir tmp;
  ExportOptions opt{Layout::CompressedTensors};
  const ExportReport rep = export_model(m, tmp / "model.safetensors", plan_of(types), opt);
  EXPECT_EQ(rep.files.size(), 2u);
  const auto st = exporttest::read_st(tmp / "model.safetensors");
  for (const auto& [n, d] : types) {
    const std::string base = n;
    std::vector<float> dec(static_cast<size_t>(xs[n].numel()));
    const int64_t cols = xs[n].shape()[1];
    if (d.rfind("fp8", 0) == 0) {
      const auto& w = st.tensors.at(base);
      const auto& s = st.tensors.at(base + "_scale");
      EXPECT_EQ(w.dtype, "F8_E4M3");
      EXPECT_EQ(s.dtype, "F32");
      for (int64_t i = 0; i < w.numel(); ++i) {
        const int64_t r = i / cols, c = i % cols;
        float sv;
        if (d == "fp8e4_tensor")
          sv = s.as<float>()[0];
        else if (d == "fp8e4_channel")
          sv = s.as<float>()[r];
        else
          sv = s.as<float>()[(r / 128) * s.shape[1] + c / 128];
        dec[static_cast<size_t>(i)] =
            static_cast<float>(exporttest::e4m3fn(w.as<uint8_t>()[i]) * sv);
      }
      if (d == "fp8e4_channel") EXPECT_EQ(s.shape, (std::vector<int64_t>{40, 1}));
      if (d == "fp8e4_block128") EXPECT_EQ(s.shape, (std::vector<int64_t>{2, 2}));
    } else {
      const auto& w = st.tensors.at(base + "_packed");
      const auto& s = st.tensors.at(base + "_scale");
      EXPECT_EQ(w.shape, (std::vector<int64_t>{40, 64}));
      const bool nv = d == "nvfp4";
      double t = 1;
      if (nv) {
        EXPECT_EQ(s.dtype, "F8_E4M3");
        const uint32_t tb = static_cast<uint32_t>(
            std::stoul(st.metadata.at("castscope." + n + ".tensor_scale"), nullptr, 16));
        float tf;
        std::memcpy(&tf, &tb, 4);
        t = tf;
        EXPECT_EQ(st.tensors.at(base + "_global_scale").as<float>()[0], 1.0f / tf);
      } else {
        EXPECT_EQ(s.dtype, "U8");
      }
      const int g = nv ? 16 : 32;
      for (int64_t i = 0; i < xs[n].numel(); ++i) {
        const uint8_t byte = w.as<uint8_t>()[i / 2];
        const double q = exporttest::e2m1(i % 2 ? byte >> 4 : byte & 0xF);
        const uint8_t sc = s.as<uint8_t>()[i / g];
        dec[static_cast<size_t>(i)] =
            static_cast<float>(nv ? q * exporttest::e4m3fn(sc) * t : q * std::ldexp(1.0, sc - 127));
      }
    }
    EXPECT_TRUE(same_bits(dec.data(), virtual_values(xs[n], d).ptr<float>(), xs[n].numel(),
                          n + " as " + d, seed));
  }
  const auto cfg = nlohmann::json::parse(exporttest::slurp(tmp / "config.json"));
  const auto& qc = cfg.at("quantization_config");
  EXPECT_EQ(qc.at("quant_method"), "compressed-tensors");
  EXPECT_EQ(qc.at("format"), "mixed-precision");
  int nv_groups = 0;
  for (const auto& [k, g] : qc.at("config_groups").items())
    if (g.at("format") == "nvfp4-pack-quantized") {
      ++nv_groups;
      EXPECT_EQ(g.at("weights").at("strategy"), "tensor_group");
      EXPECT_EQ(g.at("targets"), nlohmann::json::array({"l.nv"}));
    }
  EXPECT_EQ(nv_groups, 1);
  EXPECT_EQ(st.tensors.at("norm.weight").dtype, "F32");
}

TEST(ExportGguf, BlocksDecode) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  const std::vector<std::pair<std::string, std::string>> types = {{"a.f16", "float16"},
                                                                  {"a.bf16", "bfloat16"},
                                                                  {"a.q8", "int8_float16_t32"},
                                                                  {"a.mx", "mxfp4e2"}};
  std::map<std::string, Tensor> xs;
  for (const auto& [n, d] : types) {
    xs[n] = random_tensor({6, 96}, rng);
    m.add(n, xs[n]);
  }
  xs["a.keep"] = random_tensor({5, 3}, rng);
  m.add("a.keep", xs["a.keep"]);
  TempDir tmp;
  export_model(m, tmp / "m.gguf", plan_of(types), ExportOptions{Layout::GGUF});
  const auto g = exporttest::read_gguf(tmp / "m.gguf");
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.uints.at("general.alignment"), 32u);
  ASSERT_EQ(g.tensors.size(), 5u);
  for (const auto& t : g.tensors) {
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    const Tensor& x = xs.at(t.name);
    EXPECT_EQ(t.ne.front(), static_cast<uint64_t>(x.shape().back())) << t.name;  // ne[0] innermost
    std::vector<float> dec(static_cast<size_t>(x.numel()));
    std::string d = "float32";
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = 0;
      switch (t.type) {
        case 0:
          std::memcpy(&v, t.data + 4 * i, 4);
          break;
        case 1: {
          uint16_t h;
          std::memcpy(&h, t.data + 2 * i, 2);
          v = exporttest::f16(h);
          d = "float16";
          break;
        }
        case 30: {
          uint16_t h;
          std::memcpy(&h, t.data + 2 * i, 2);
          const uint32_t u = static_cast<uint32_t>(h) << 16;
          std::memcpy(&v, &u, 4);
          d = "bfloat16";
          break;
        }
        case 8: {  // Q8_0: fp16 d, 32 x int8
          const uint8_t* blk = t.data + (i / 32) * 34;
          uint16_t h;
          std::memcpy(&h, blk, 2);
          v = exporttest::f16(h) * static_cast<float>(static_cast<int8_t>(blk[2 + i % 32]));
          d = "int8_float16_t32";
          break;
        }
        case 39: {  // MXFP4: e8m0, then byte j = element j (low) | element j+16 (high)
          const uint8_t* blk = t.data + (i / 32) * 17;
          const int k = static_cast<int>(i % 32);
          const uint8_t code = k < 16 ? blk[1 + k] & 0xF : blk[1 + k - 16] >> 4;
          v = static_cast<float>(exporttest::e2m1(code) * std::ldexp(1.0, blk[0] - 127));
          d = "mxfp4e2";
          break;
        }
        default:
          FAIL() << "unexpected type " << t.type;
      }
      dec[static_cast<size_t>(i)] = v;
    }
    const Tensor want = t.name == "a.keep" ? x : virtual_values(x, d);
    EXPECT_TRUE(same_bits(dec.data(), want.ptr<float>(), x.numel(), t.name + " as " + d, seed));
  }
}

// ---------------------------------------------------------------------------------------------

TEST(ExportPlanTest, PatternsRanksAndDefaults) {
  const ExportPlan p = parse_plan(R"({"default": "fp8e4_tensor", "rules": [
      {"pattern": "*.norm*", "dtype": "keep"},
      {"pattern": "re:layers\\.[0-3]\\.mlp", "dtype": "mxfp4e2"},
      {"pattern": "layers.?.attn.[qk]_proj.weight", "dtype": "nvfp4", "rank": 2},
      {"pattern": "*", "dtype": "mxfp8e4", "rank": 2}]})",
                                  "p.json");
  auto info = [](std::string name, Shape s, std::string dt = "BF16") {
    io::TensorInfo i;
    i.name = std::move(name);
    i.shape = std::move(s);
    i.dtype = std::move(dt);
    return i;
  };
  auto dt = [&](const io::TensorInfo& i) {
    auto d = p.dtype_for(i);
    return d ? d->str() : std::string("keep");
  };
  EXPECT_EQ(dt(info("layers.1.norm.weight", {64})), "keep");
  EXPECT_EQ(dt(info("layers.2.mlp.up.weight", {64, 64})), "e2m1fnuz_e8m0_t32");
  EXPECT_EQ(dt(info("layers.7.mlp.up.weight", {64, 64})), "e4m3fn_e8m0_t32");
  EXPECT_EQ(dt(info("layers.5.attn.q_proj.weight", {64, 64})), "e2m1fnuz_e4m3fn_float32_t16");
  EXPECT_EQ(dt(info("layers.5.attn.v_proj.weight", {64, 64})), "e4m3fn_e8m0_t32");
  EXPECT_EQ(dt(info("layers.5.attn.q_proj.weight", {64, 4, 16})),
            "e4m3fn_float32");                              // rank 3: default
  EXPECT_EQ(dt(info("tok_ids", {64, 64}, "I64")), "keep");  // never cast ints
  EXPECT_TRUE(glob_match("a*b?c[0-9]", "a.x.yb_c7"));
  EXPECT_FALSE(glob_match("a*b?c[0-9]", "a.x.yb_cx"));
  EXPECT_TRUE(glob_match("x[!ab]", "xc"));
  EXPECT_FALSE(glob_match("x[!ab]", "xa"));
  // Saved and loaded again: the same decisions.
  TempDir tmp;
  save_plan(tmp / "p.json", p);
  const ExportPlan q = load_plan(tmp / "p.json");
  EXPECT_EQ(plan_to_json(q), plan_to_json(p));
  EXPECT_EQ(q.dtype_for(info("layers.3.mlp.x", {2, 2}))->str(), "e2m1fnuz_e8m0_t32");
}

void expect_plan_error(const std::string& text, const std::string& must_contain) {
  TempDir tmp;
  const std::string path = tmp / "bad-plan.json";
  std::ofstream(path) << text;
  try {
    load_plan(path);
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(must_contain), std::string::npos) << msg;
  }
}

TEST(ExportPlanTest, BadPlansNameTheFile) {
  expect_plan_error(R"({"default": "keep", "rules": [)", "invalid JSON");
  expect_plan_error(R"({"rules": [{"pattern": "*", "dtype": "e9m9zz"}]})",
                    "unknown datatype 'e9m9zz'");
  expect_plan_error(R"({"rules": [{"pattern": "re:layers.(", "dtype": "nvfp4"}]})",
                    "bad regular expression");
  expect_plan_error(R"({"default": "nope"})", "unknown datatype 'nope'");
  expect_plan_error(R"({"rules": [{"pattern": "*"}]})", "rule 0");
  expect_plan_error(R"({"rulez": []})", "unknown key");
  expect_plan_error(R"([1, 2])", "JSON object");
  expect_plan_error(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rank": 2.5}]})",
                    "\"rank\": 2.5 is not an integer");
  expect_plan_error(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rank": 1e300}]})",
                    "\"rank\"");
  expect_plan_error(
      R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rank": 35555555555555555555555555555}]})",
      "\"rank\"");
  expect_plan_error(
      R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rank": 18446744073709551615}]})",
      "out of range");
  expect_plan_error(R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "rank": -1}]})",
                    "out of range");
  EXPECT_THROW(load_plan("/nonexistent/plan.json"), Error);
}

// ---------------------------------------------------------------------------------------------

TEST(ExportCancel, LeavesNoFileAndKeepsThePreviousOne) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  for (int i = 0; i < 6; ++i) m.add("w" + std::to_string(i), random_tensor({64, 128}, rng));
  for (Layout layout : {Layout::Native, Layout::GptOss, Layout::CompressedTensors, Layout::GGUF}) {
    TempDir tmp;
    const std::string out = tmp / "out.bin";
    // First without a previous file, then over one that must survive byte for byte.
    for (bool previous : {false, true}) {
      if (previous) std::ofstream(out) << "previous contents";
      JobControl job;
      job.on_progress = [&](double f) {
        if (f > 0.3) job.cancel = true;
      };
      ExportOptions o{layout};
      EXPECT_THROW(export_model(m, out, plan_of({{"*", "mxfp4e2"}}), o, &job), Cancelled)
          << to_string(layout);
      if (previous) {
        EXPECT_EQ(exporttest::slurp(out), "previous contents") << to_string(layout);
        EXPECT_EQ(tmp.count(), 1u) << to_string(layout);  // no temporary left beside it
      } else {
        EXPECT_FALSE(fs::exists(out)) << to_string(layout);
        EXPECT_EQ(tmp.count(), 0u) << to_string(layout);
      }
    }
  }
}

TEST(ExportErrors, LayoutLimitsNameTheTensor) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m("model.safetensors");
  m.add("odd.weight", random_tensor({4, 48}, rng));
  TempDir tmp;
  auto msg = [&](Layout l, const std::string& d) {
    try {
      export_model(m, tmp / "o", plan_of({{"*", d}}), ExportOptions{l});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const auto& [l, d] :
       std::vector<std::pair<Layout, std::string>>{{Layout::GptOss, "mxfp4e2"},
                                                   {Layout::GptOss, "nvfp4"},
                                                   {Layout::CompressedTensors, "mx9"},
                                                   {Layout::GGUF, "mxfp4e2"},
                                                   {Layout::GGUF, "mxfp8e4"}}) {
    const std::string e = msg(l, d);
    EXPECT_NE(e.find("odd.weight"), std::string::npos) << to_string(l) << " " << d << ": " << e;
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  }
  EXPECT_EQ(tmp.count(), 0u);
  EXPECT_THROW(parse_layout("onnx"), Error);
}

TEST(ExportKeep, StoredBitsSurviveEveryLayout) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  MemoryModel m;
  Tensor ids = Tensor::empty(DType::I64, {5});
  for (int i = 0; i < 5; ++i)
    ids.mutable_ptr<int64_t>()[i] = static_cast<int64_t>(rng() >> 8) - (int64_t{1} << 54);
  m.add("ids", ids);  // beyond float32's 2^24: must not pass through float32
  Tensor h = Tensor::empty(DType::F16, {64});
  for (int i = 0; i < 64; ++i) h.mutable_ptr<uint16_t>()[i] = static_cast<uint16_t>(rng() & 0x7BFF);
  m.add("h", h);
  m.add("w", random_tensor({4, 64}, rng));
  TempDir tmp;
  for (Layout l : {Layout::Native, Layout::GptOss, Layout::CompressedTensors, Layout::GGUF}) {
    const std::string out = tmp / (std::string("k-") + to_string(l));
    export_model(m, out, plan_of({{"w", "mxfp4e2"}}), ExportOptions{l});
    std::string ids_bytes, h_bytes;
    if (l == Layout::GGUF) {
      const auto g = exporttest::read_gguf(out);
      for (const auto& t : g.tensors) {
        if (t.name == "ids") {
          ids_bytes.assign(reinterpret_cast<const char*>(t.data), 40);
          EXPECT_EQ(t.type, 27u);
        }
        if (t.name == "h") {
          h_bytes.assign(reinterpret_cast<const char*>(t.data), 128);
          EXPECT_EQ(t.type, 1u);
        }
      }
    } else {
      const auto st = exporttest::read_st(out);
      ids_bytes = st.tensors.at("ids").bytes;
      h_bytes = st.tensors.at("h").bytes;
      EXPECT_EQ(st.tensors.at("ids").dtype, "I64");
      EXPECT_EQ(st.tensors.at("h").dtype, "F16");
    }
    EXPECT_EQ(ids_bytes, std::string(static_cast<const char*>(ids.data()), 40))
        << to_string(l) << " seed " << seed;
    EXPECT_EQ(h_bytes, std::string(static_cast<const char*>(h.data()), 128))
        << to_string(l) << " seed " << seed;
  }
}

TEST(SaveSafetensors, WritesWhatItIsGiven) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const Tensor a = random_tensor({3, 5}, rng);
  Tensor b = Tensor::empty(DType::I16, {4});
  for (int i = 0; i < 4; ++i) b.mutable_ptr<int16_t>()[i] = static_cast<int16_t>(rng());
  save_safetensors(tmp / "s.safetensors", {{"a", a}, {"b", b}}, {{"k", "v"}});
  const auto st = exporttest::read_st(tmp / "s.safetensors");
  EXPECT_EQ(st.metadata.at("k"), "v");
  EXPECT_EQ(st.tensors.at("a").bytes, std::string(static_cast<const char*>(a.data()), a.nbytes()));
  EXPECT_EQ(st.tensors.at("b").dtype, "I16");
  EXPECT_EQ(st.tensors.at("b").bytes, std::string(static_cast<const char*>(b.data()), b.nbytes()));
  EXPECT_THROW(save_safetensors(tmp / "d.safetensors", {{"a", a}, {"a", a}}, {}), Error);
  EXPECT_FALSE(fs::exists(tmp / "d.safetensors"));
}

}  // namespace
