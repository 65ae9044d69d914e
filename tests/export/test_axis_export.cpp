// Quantization axes through files: plan rules, the packed layout's metadata, conv weights read
// from a checkpoint and exported, and the layouts that fix their own axis (gguf, gpt-oss,
// compressed-tensors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/export.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"
#include "export_test_util.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

Tensor normal_tensor(const Shape& shape, std::mt19937_64& rng) {
  return exporttest::spread_tensor(shape, rng, 5);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

CastOptions cpu(CastMode mode = CastMode::Virtual) {
  CastOptions o;
  o.device = Device::CPU;
  o.mode = mode;
  return o;
}

// The cast of the [O, I*kh*kw] view, the way the stacks group a conv weight.
Tensor view_cast(const Tensor& x, const std::string& dtype) {
  const Shape v = {x.shape()[0], x.numel() / x.shape()[0]};
  return cast(x.reshaped(v), DataType::parse(dtype), cpu()).values.reshaped(x.shape());
}

struct Tmp : exporttest::ScratchDir {
  Tmp() : ScratchDir("castscope_axis_") {}
};

}  // namespace

TEST(AxisPlan, RoundTripAndOldPlans) {
  const ExportPlan p = parse_plan(R"({"rules": [
      {"pattern": "conv*", "dtype": "mxfp8e4", "axis": "1:"},
      {"pattern": "fc*", "dtype": "nvfp4", "axis": -1},
      {"pattern": "x*", "dtype": "nvfp4", "axis": "auto"},
      {"pattern": "*", "dtype": "mxfp4e2"}]})");
  ASSERT_EQ(p.rules.size(), 4u);
  EXPECT_EQ(p.rules[0].axis->str(), "1:");
  EXPECT_EQ(p.rules[1].axis->str(), "-1");
  EXPECT_TRUE(p.rules[2].axis->automatic);
  EXPECT_FALSE(p.rules[3].axis);  // a plan without the key: the command's axis applies
  const ExportPlan back = parse_plan(plan_to_json(p));
  for (size_t i = 0; i < p.rules.size(); ++i) EXPECT_EQ(back.rules[i].axis, p.rules[i].axis) << i;
  EXPECT_EQ(nlohmann::json::parse(plan_to_json(p))["rules"][1]["axis"], -1);
  io::TensorInfo t{"conv1.weight", "F32", {64, 3, 7, 7}, 0, ""};
  EXPECT_EQ(p.axis_for(t)->str(), "1:");
  for (const char* bad : {R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "axis": "1x"}]})",
                          R"({"rules": [{"pattern": "*", "dtype": "nvfp4", "axis": 1.5}]})"}) {
    try {
      parse_plan(bad, "bad.json");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rule 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("axis"), std::string::npos) << e.what();
    }
  }
}

// Conv weights of real shapes in a safetensors checkpoint: read, cast with the default datatype
// on the default axis without an error, exported natively and read back, all equal to the cast
// of the [O, I*kh*kw] view bit for bit.
TEST(AxisFiles, ConvCheckpointNativeRoundTrip) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  const std::map<std::string, Tensor> ts = {
      {"conv1.weight", normal_tensor({64, 3, 7, 7}, rng)},
      {"layer2.conv.weight", normal_tensor({256, 128, 3, 3}, rng)},
      {"fc.weight", normal_tensor({10, 512}, rng)}};
  std::vector<std::pair<std::string, Tensor>> list(ts.begin(), ts.end());
  save_safetensors(tmp / "cnn.safetensors", list, {});
  const auto model = io::open_model(tmp / "cnn.safetensors");
  CastOptions o = cpu();
  o.axis_auto = true;
  for (const auto& [name, x] : ts) {
    const Tensor got = cast(model->load(name), DataType::parse("mxfp8e4"), o).values;
    const Tensor want =
        x.rank() == 4 ? view_cast(x, "mxfp8e4") : cast(x, DataType::parse("mxfp8e4"), cpu()).values;
    EXPECT_TRUE(same_bits(got, want)) << name << " seed " << seed;
  }
  ExportOptions eo;
  eo.cast = o;
  const ExportReport rep =
      export_model(*model, tmp / "out.safetensors",
                   parse_plan(R"({"rules": [{"pattern": "*", "dtype": "mxfp8e4"}]})"), eo);
  const auto st = exporttest::read_st(tmp / "out.safetensors");
  EXPECT_EQ(st.metadata.at("conv1.weight.flatten"), "true");
  EXPECT_EQ(st.metadata.at("conv1.weight.axis"), "1");
  EXPECT_EQ(st.metadata.count("fc.weight.flatten"), 0u);
  EXPECT_EQ(st.metadata.at("castscope.version"), "3");
  EXPECT_EQ(st.tensors.at("conv1.weight").shape, (std::vector<int64_t>{64, 147}));
  EXPECT_EQ(st.tensors.at("conv1.weight.scale").shape, (std::vector<int64_t>{64, 5}));
  for (const ExportedTensor& t : rep.tensors)
    if (t.name == "conv1.weight") EXPECT_EQ(t.axis, "1..3:147");
  for (const io::PackedTensor& p : io::load_packed(tmp / "out.safetensors")) {
    const Tensor& x = ts.at(p.name);
    EXPECT_EQ(p.result.shape, x.shape()) << p.name;
    EXPECT_EQ(p.result.options.flatten, x.rank() == 4) << p.name;
    const Tensor want =
        x.rank() == 4 ? view_cast(x, "mxfp8e4") : cast(x, DataType::parse("mxfp8e4"), cpu()).values;
    EXPECT_TRUE(same_bits(upcast(p.result), want)) << p.name << " seed " << seed;
  }
  // A plan rule's axis beats the export's: the kernel axis alone, as before flattening existed.
  export_model(*model, tmp / "kw.safetensors",
               parse_plan(R"({"rules": [{"pattern": "conv1.*", "dtype": "mxfp8e4", "axis": -1}]})"),
               eo);
  bool found = false;
  for (const io::PackedTensor& p : io::load_packed(tmp / "kw.safetensors")) {
    if (p.name != "conv1.weight") continue;  // the others are kept (unscaled float32 codes)
    found = true;
    EXPECT_FALSE(p.result.options.flatten);
    EXPECT_TRUE(same_bits(upcast(p.result),
                          cast(ts.at("conv1.weight"), DataType::parse("mxfp8e4"), cpu()).values));
  }
  EXPECT_TRUE(found);
}

// Files written before flattened axes existed have no NAME.flatten key and version 1 or 2: they
// read as tiles along NAME.axis alone and decompress exactly as before.
TEST(AxisFiles, PackedWithoutFlattenKeyReadsAsBefore) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  const Tensor x = normal_tensor({16, 8, 3, 3}, rng);
  CastOptions o = cpu(CastMode::Compress);
  const CastResult r = cast(x, DataType::parse("mxfp8e4"), o);  // axis -1: the kernel axis
  io::save_packed(tmp / "old.safetensors", {{"w", r}});
  const auto st = exporttest::read_st(tmp / "old.safetensors");
  EXPECT_EQ(st.metadata.count("w.flatten"), 0u);
  EXPECT_EQ(st.metadata.at("castscope.version"), "1");
  const auto back = io::load_packed(tmp / "old.safetensors");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_FALSE(back[0].result.options.flatten);
  EXPECT_TRUE(same_bits(upcast(back[0].result), cast(x, DataType::parse("mxfp8e4"), cpu()).values))
      << "seed " << seed;
  // The flattened cast of the same tensor round-trips with its key; a bad key value is refused.
  o.axis_auto = true;
  const CastResult f = cast(x, DataType::parse("nvfp4"), o);
  io::save_packed(tmp / "new.safetensors", {{"w", f}});
  const auto nb = io::load_packed(tmp / "new.safetensors");
  EXPECT_TRUE(nb[0].result.options.flatten);
  EXPECT_TRUE(same_bits(upcast(nb[0].result), view_cast(x, "nvfp4"))) << "seed " << seed;
  // The codes of a flattened tensor do not fit NAME.shape without the key: refused, not misread.
  std::string bytes = exporttest::slurp(tmp / "new.safetensors");
  const size_t k = bytes.find("\"w.flatten\":\"true\"");
  ASSERT_NE(k, std::string::npos);
  bytes.replace(k, 18, "\"w.flatten\":\"nope\"");
  { std::ofstream(tmp / "bad.safetensors", std::ios::binary) << bytes; }
  EXPECT_THROW(io::load_packed(tmp / "bad.safetensors"), Error);
}

TEST(AxisLayouts, EachStackKeepsItsAxis) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  MemoryModel m;
  m.add("features.0.weight", normal_tensor({64, 32, 3, 3}, rng));
  ExportOptions eo;
  eo.cast = cpu();
  eo.cast.axis_auto = true;
  eo.layout = Layout::CompressedTensors;
  eo.config_path = tmp / "config.json";
  // compressed-tensors quantizes Linear / Embedding weights only: a conv weight is refused.
  try {
    export_model(m, tmp / "ct.safetensors",
                 parse_plan(R"({"rules": [{"pattern": "*", "dtype": "mxfp8e4"}]})"), eo);
    ADD_FAILURE() << "compressed-tensors took a conv weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Linear"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("features.0.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "ct.safetensors"));
}

// transformers' gpt-oss experts are [E, in, out]: the layout's default axis is -2 and the blocks
// are stored [E, out, in / 32, 16] as NAME_blocks / NAME_scales.
TEST(AxisLayouts, GptOssExpertsAlongTheirInputs) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  const Tensor w = normal_tensor({2, 64, 96}, rng);  // [E, in = 64, out = 96]
  MemoryModel m;
  m.add("model.layers.0.mlp.experts.gate_up_proj", w);
  ExportOptions eo;
  eo.cast = cpu();
  eo.cast.axis_auto = true;
  eo.layout = Layout::GptOss;
  export_model(m, tmp / "o.safetensors",
               parse_plan(R"({"rules": [{"pattern": "*experts*", "dtype": "mxfp4e2"}]})"), eo);
  const auto st = exporttest::read_st(tmp / "o.safetensors");
  const auto& bl = st.tensors.at("model.layers.0.mlp.experts.gate_up_proj_blocks");
  const auto& sc = st.tensors.at("model.layers.0.mlp.experts.gate_up_proj_scales");
  EXPECT_EQ(bl.shape, (std::vector<int64_t>{2, 96, 2, 16}));
  EXPECT_EQ(sc.shape, (std::vector<int64_t>{2, 96, 2}));
  CastOptions o = cpu();
  o.axis = -2;
  const Tensor want = cast(w, DataType::parse("mxfp4e2"), o).values;
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t out = 0; out < 96; ++out)
      for (int64_t in = 0; in < 64; ++in) {
        const int64_t k = (e * 96 + out) * 64 + in;  // element of the stored [E, out, in]
        const uint8_t byte = bl.as<uint8_t>()[k / 2];
        const uint8_t code = k % 2 ? byte >> 4 : byte & 0xF;
        const float v = static_cast<float>(exporttest::e2m1(code) *
                                           std::ldexp(1.0, sc.as<uint8_t>()[k / 32] - 127));
        const float wv = want.ptr<float>()[(e * 64 + in) * 96 + out];
        ASSERT_EQ(std::memcmp(&v, &wv, 4), 0)
            << "expert " << e << " out " << out << " in " << in << " seed " << seed;
      }
}

// A leading-flattened cast (":2", a Keras kernel) writes NAME.flatten "lead" and version 4, and
// reads back to the same values; readers before 4 refuse the key by name.
TEST(AxisFiles, PackedLeadingFlattenRoundTrips) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  const Tensor x = normal_tensor({3, 3, 16, 24}, rng);
  CastOptions o = cpu(CastMode::Compress);
  AxisSpec::parse(":2").apply(o);
  Tmp tmp;
  const CastResult r = cast(x, DataType::parse("mxfp8e4"), o);
  io::save_packed(tmp / "lead.safetensors", {{"w", r}});
  const auto st = exporttest::read_st(tmp / "lead.safetensors");
  EXPECT_EQ(st.metadata.at("w.flatten"), "lead");
  EXPECT_EQ(st.metadata.at("castscope.version"), "4");
  const auto back = io::load_packed(tmp / "lead.safetensors");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].result.options.lead);
  CastOptions v = cpu();
  v.axis = 0;
  EXPECT_TRUE(same_bits(
      upcast(back[0].result),
      cast(x.reshaped({144, 24}), DataType::parse("mxfp8e4"), v).values.reshaped(x.shape())))
      << "seed " << seed;
}

// The plan's default is a shortcut over the weights: every float tensor of rank 2 or more that
// is not an embedding, along its resolved layout; 1-D tensors and embeddings stay as stored
// unless a rule names them.
TEST(AxisPlan, DefaultTakesEveryWeightAndKeepsVectorsAndEmbeddings) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  const std::vector<std::pair<std::string, Tensor>> list = {
      {"model.embed_tokens.weight", normal_tensor({50, 32}, rng)},
      {"model.norm.weight", normal_tensor({32}, rng)},
      {"fc.bias", normal_tensor({48}, rng)},
      {"fc.weight", normal_tensor({48, 32}, rng)},
      {"conv.weight", normal_tensor({16, 8, 3, 3}, rng)},
      {"experts", normal_tensor({2, 16, 32}, rng)}};
  save_safetensors(tmp / "m.safetensors", list, {});
  const auto model = io::open_model(tmp / "m.safetensors");
  const ExportPlan p = parse_plan(R"({"default": "mxfp8e4", "rules": []})", "d.json");
  std::map<std::string, bool> cast_it;
  for (const io::TensorInfo& t : model->tensors()) cast_it[t.name] = p.dtype_for(t).has_value();
  EXPECT_FALSE(cast_it.at("model.embed_tokens.weight"));
  EXPECT_FALSE(cast_it.at("model.norm.weight"));
  EXPECT_FALSE(cast_it.at("fc.bias"));
  EXPECT_TRUE(cast_it.at("fc.weight"));
  EXPECT_TRUE(cast_it.at("conv.weight"));
  EXPECT_TRUE(cast_it.at("experts"));
  // A rule names them when asked; the default still covers the rest.
  const ExportPlan q = parse_plan(R"({"default": "mxfp8e4", "rules": [
      {"pattern": "*norm*", "dtype": "bfloat16"}, {"pattern": "*embed*", "dtype": "mxfp6e2"}]})");
  for (const io::TensorInfo& t : model->tensors()) {
    const auto d = q.dtype_for(t);
    if (t.name == "model.norm.weight") EXPECT_EQ(d->str(), "bfloat16");
    if (t.name == "model.embed_tokens.weight") EXPECT_EQ(d->name(), "mxfp6e2");
    if (t.name == "fc.bias") EXPECT_FALSE(d.has_value());
  }
  // Exported natively: the conv weight is cast over I*kh*kw (its view), the vectors kept.
  ExportOptions eo;
  eo.cast = cpu();
  eo.cast.axis_auto = true;
  export_model(*model, tmp / "d.safetensors", p, eo);
  const auto st = exporttest::read_st(tmp / "d.safetensors");
  EXPECT_EQ(st.metadata.at("conv.weight.dtype"), "e4m3fn_e8m0_t32");
  EXPECT_EQ(st.metadata.at("conv.weight.flatten"), "true");
  EXPECT_EQ(st.metadata.at("fc.bias.dtype"), "float32");  // kept: an unscaled cast to itself
  EXPECT_EQ(st.metadata.at("model.embed_tokens.weight.dtype"), "float32");
}

// Axis-only rules (a per-tensor layout override) beat every datatype rule's axis, survive a
// plan's save and load, are recorded in the packed file the export writes and decompress to the
// cast along the overridden axis. Plans with a rule missing both "dtype" and "axis" are refused.
TEST(AxisPlan, OverrideSurvivesPlanFilesAndPackedExport) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  const Tensor deconv = normal_tensor({16, 8, 3, 3}, rng);  // a ConvTranspose [Cin, Cout, k, k]
  const Tensor fc = normal_tensor({40, 64}, rng);
  save_safetensors(tmp / "m.safetensors", {{"deconv.weight", deconv}, {"fc.weight", fc}}, {});
  const auto model = io::open_model(tmp / "m.safetensors");
  ExportPlan p = parse_plan(R"({"default": "keep", "rules": [
      {"pattern": "*", "dtype": "mxfp8e4", "weights": true, "axis": "auto"},
      {"pattern": "deconv.*", "axis": ":0"}]})",
                            "o.json");
  ASSERT_EQ(p.rules.size(), 2u);
  EXPECT_TRUE(p.rules[1].axis_only);
  EXPECT_EQ(p.match("deconv.weight", 4), 0);  // the datatype comes from the first rule
  save_plan(tmp / "o.json", p);
  const ExportPlan back = load_plan(tmp / "o.json");
  EXPECT_EQ(plan_to_json(back), plan_to_json(p));
  const nlohmann::json j = nlohmann::json::parse(plan_to_json(back));
  EXPECT_FALSE(j["rules"][1].contains("dtype"));
  EXPECT_EQ(j["rules"][1]["axis"], ":0");
  for (const io::TensorInfo& t : model->tensors()) {
    ASSERT_TRUE(back.dtype_for(t).has_value()) << t.name;
    EXPECT_EQ(back.axis_for(t)->str(), t.name == "deconv.weight" ? ":0" : "auto") << t.name;
  }
  ExportOptions eo;
  eo.cast = cpu();
  eo.cast.axis_auto = true;
  const ExportReport rep = export_model(*model, tmp / "o.safetensors", back, eo);
  for (const ExportedTensor& t : rep.tensors)
    if (t.name == "deconv.weight") EXPECT_EQ(t.axis, "0:16");
  const auto st = exporttest::read_st(tmp / "o.safetensors");
  EXPECT_EQ(st.metadata.at("deconv.weight.flatten"), "lead");
  EXPECT_EQ(st.metadata.at("deconv.weight.axis"), "0");
  EXPECT_EQ(st.metadata.at("castscope.version"), "4");
  CastOptions v = cpu();
  v.axis = 0;
  const Tensor want_deconv = cast(deconv.reshaped({16, 72}), DataType::parse("mxfp8e4"), v)
                                 .values.reshaped(deconv.shape());
  const Tensor want_fc = cast(fc, DataType::parse("mxfp8e4"), cpu()).values;
  int seen = 0;
  for (const io::PackedTensor& t : io::load_packed(tmp / "o.safetensors")) {
    const Tensor got = upcast(t.result);
    if (t.name == "deconv.weight") {
      ++seen;
      EXPECT_TRUE(t.result.options.lead);
      EXPECT_TRUE(same_bits(got, want_deconv)) << "seed " << seed;
      // Without the override the weight goes along its guessed conv layout: other figures.
      EXPECT_FALSE(same_bits(got, view_cast(deconv, "mxfp8e4"))) << "seed " << seed;
    } else if (t.name == "fc.weight") {
      ++seen;
      EXPECT_TRUE(same_bits(got, want_fc)) << "seed " << seed;
    }
  }
  EXPECT_EQ(seen, 2);
  // The same override as the model's own layout (what --axis-for gives inspect, report and map):
  // not guessed, its reason naming the rule, and the cast along it is the one exported.
  const auto over = with_layout_overrides(io::open_model(tmp / "m.safetensors"), back);
  const io::TensorInfo* d = over->find("deconv.weight");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->layout.axis.str(), ":0");
  EXPECT_FALSE(d->layout.guessed);
  EXPECT_NE(d->layout.reason.find("rule 1 ('deconv.*')"), std::string::npos) << d->layout.reason;
  EXPECT_EQ(over->find("fc.weight")->layout.layout, model->find("fc.weight")->layout.layout);
  CastOptions ao = cpu();
  ao.axis_auto = true;
  EXPECT_TRUE(same_bits(
      cast(over->load("deconv.weight"), DataType::parse("mxfp8e4"), io::cast_options_for(ao, *d))
          .values,
      want_deconv))
      << "seed " << seed;
  const ExportPlan texts = axis_override_plan({"deconv.*=:0", "re:^fc=-1"});
  ASSERT_EQ(texts.rules.size(), 2u);
  EXPECT_TRUE(texts.rules[0].axis_only && texts.rules[1].axis_only);
  EXPECT_EQ(texts.rules[1].axis->str(), "-1");
  EXPECT_EQ(with_axis_overrides(p, texts).rules.size(), 4u);
  EXPECT_THROW(axis_override_plan({"deconv.*"}), Error);
  EXPECT_THROW(axis_override_plan({"deconv.*=x"}), Error);
  EXPECT_THROW(
      with_layout_overrides(io::open_model(tmp / "m.safetensors"), axis_override_plan({"fc.*=2"})),
      Error);  // axis 2 of a rank-2 tensor
  for (const char* bad : {R"({"rules": [{"pattern": "*"}]})",
                          R"({"rules": [{"pattern": "*", "axis": "0", "rotate": "h32"}]})",
                          R"({"rules": [{"pattern": "*", "axis": "x"}]})"}) {
    try {
      parse_plan(bad, "bad.json");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rule 0"), std::string::npos) << e.what();
    }
  }
}

// Every exporter refuses, by the tensor's name, a weight whose file shows a reduction the target
// cannot hold (a Keras Dense kernel [in, out] reduces over axis 0), and leaves no file behind;
// the native layout holds it with a block format that tiles any axis.
TEST(AxisLayouts, TargetsRefuseALayoutTheyCannotHold) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Tmp tmp;
  save_safetensors(tmp / "k.safetensors",
                   {{"dense/kernel:0", normal_tensor({64, 32}, rng)},
                    {"dense/bias:0", normal_tensor({32}, rng)}},
                   {});
  const auto model = io::open_model(tmp / "k.safetensors");
  const io::TensorInfo& k = model->tensors()[model->tensors()[0].name == "dense/kernel:0" ? 0 : 1];
  ASSERT_EQ(k.name, "dense/kernel:0");
  ASSERT_FALSE(k.layout.guessed) << k.layout.reason;
  ASSERT_EQ(k.layout.axis.str(), "0");
  struct Case {
    Layout layout;
    const char* dtype;
    const char* says;  // a word of the reason
    const char* file;
  };
  for (const Case& c : {Case{Layout::Native, "q4_k", "rows", "n.safetensors"},
                        Case{Layout::CompressedTensors, "mxfp8e4", "last axis", "c.safetensors"},
                        Case{Layout::GptOss, "mxfp4e2", "gpt-oss", "g.safetensors"},
                        Case{Layout::GGUF, "q8_0", "rows", "m.gguf"}}) {
    ExportOptions eo;
    eo.cast = cpu();
    eo.cast.axis_auto = true;
    eo.layout = c.layout;
    eo.config_path = tmp / "config.json";
    try {
      export_model(*model, tmp / c.file, plan_for_dtype(c.dtype), eo);
      ADD_FAILURE() << to_string(c.layout) << " took a Dense kernel [in, out] as " << c.dtype;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("dense/kernel:0"), std::string::npos) << to_string(c.layout) << ": " << m;
      EXPECT_NE(m.find(c.says), std::string::npos) << to_string(c.layout) << ": " << m;
    }
    EXPECT_FALSE(fs::exists(tmp / c.file)) << to_string(c.layout);
  }
  ExportOptions eo;
  eo.cast = cpu();
  eo.cast.axis_auto = true;
  const ExportReport rep =
      export_model(*model, tmp / "ok.safetensors", plan_for_dtype("mxfp8e4"), eo);
  for (const ExportedTensor& t : rep.tensors)
    if (t.name == "dense/kernel:0") EXPECT_EQ(t.axis, "0:64");
}
