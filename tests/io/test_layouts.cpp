// Quantization layouts resolved by the readers (docs/formats.md, "Resolved layouts"): an ONNX
// graph's consumers, a checkpoint's config.json, Keras / TF names and sibling biases. The
// Python layout test (tests/interop/test_layouts.py) checks the figures on real files; this one
// checks the rules without Python.
#include <cstring>

#include "castscope/export.hpp"
#include "io_test_util.hpp"
#ifdef CASTSCOPE_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace castscope::iotest {
namespace {

Bytes f32_bytes(const Shape& s) {
  Bytes b(static_cast<size_t>(numel(s)) * 4);
  std::mt19937_64 rng(seed() + 29);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < b.size(); i += 4) {
    const float v = nd(rng);
    std::memcpy(&b[i], &v, 4);
  }
  return b;
}

StTensor st(const std::string& name, const Shape& s) {
  return {name, "F32", s, f32_bytes(s)};
}

const io::TensorInfo& info(const io::Model& m, const std::string& name) {
  const io::TensorInfo* t = m.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  return *t;
}

TEST(Layouts, KerasNamesSiblingBiasesAndTorchNames) {
  IO_SEED_TRACE();
  TempDir dir;
  write_file(dir / "k.safetensors",
             safetensors_bytes(
                 {st("model/conv2d/kernel:0", {3, 3, 8, 16}), st("model/conv2d/bias:0", {16}),
                  st("model/dense/kernel:0", {64, 10}), st("dw/depthwise_kernel", {3, 3, 16, 1}),
                  st("head.conv.weight", {3, 3, 8, 24}), st("head.conv.bias", {24}),
                  st("fc.weight", {10, 64}), st("fc.bias", {10}), st("blob", {5, 7, 9})}));
  auto m = io::open_model(dir / "k.safetensors");
  const auto& conv = info(*m, "model/conv2d/kernel:0").layout;
  EXPECT_EQ(conv.axis.str(), ":2");
  EXPECT_FALSE(conv.guessed);
  EXPECT_EQ(layout_view({3, 3, 8, 16}, conv.axis), (Shape{16, 72}));
  EXPECT_EQ(info(*m, "model/dense/kernel:0").layout.axis.str(), "0");
  EXPECT_EQ(info(*m, "dw/depthwise_kernel").layout.axis.str(), ":1");
  // Only the bias's length tells this channels-last kernel apart.
  EXPECT_EQ(info(*m, "head.conv.weight").layout.axis.str(), ":2");
  EXPECT_EQ(info(*m, "fc.weight").layout.axis.str(), "-1");
  EXPECT_TRUE(info(*m, "blob").layout.guessed);
  // An automatic axis takes the layout; a named one wins.
  CastOptions o;
  o.axis_auto = true;
  EXPECT_TRUE(io::cast_options_for(o, info(*m, "model/conv2d/kernel:0")).lead);
  CastOptions named;
  named.axis = -1;
  EXPECT_FALSE(io::cast_options_for(named, info(*m, "model/conv2d/kernel:0")).flatten);
  // The --dtype shortcut casts every weight of rank >= 2, no 1-D tensor.
  const ExportPlan p = plan_for_dtype("mxfp8e4");
  EXPECT_TRUE(p.dtype_for(info(*m, "model/conv2d/kernel:0")));
  EXPECT_FALSE(p.dtype_for(info(*m, "model/conv2d/bias:0")));
}

TEST(Layouts, Gpt2Conv1DFromConfigJson) {
  IO_SEED_TRACE();
  TempDir dir;
  write_file(dir / "model.safetensors",
             safetensors_bytes({st("h.0.attn.c_attn.weight", {64, 192}),
                                st("h.0.mlp.c_proj.weight", {256, 64}), st("wte.weight", {96, 64}),
                                st("h.0.other.weight", {32, 64})}));
  {
    auto m = io::open_model(dir / "model.safetensors");  // no config.json: names decide
    EXPECT_EQ(info(*m, "h.0.attn.c_attn.weight").layout.axis.str(), "-1");
  }
  const std::string cfg = R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})";
  write_file(dir / "config.json", Bytes(cfg.begin(), cfg.end()));
  auto m = io::open_model(dir.path().string());
  EXPECT_EQ(info(*m, "h.0.attn.c_attn.weight").layout.axis.str(), "0");
  EXPECT_EQ(info(*m, "h.0.mlp.c_proj.weight").layout.axis.str(), "0");
  EXPECT_EQ(info(*m, "h.0.other.weight").layout.axis.str(), "-1");
  EXPECT_TRUE(info(*m, "wte.weight").layout.embedding);
  EXPECT_FALSE(plan_for_dtype("nvfp4").dtype_for(info(*m, "wte.weight")));
}

// gpt-oss experts [E, in, out] by model_type, or by the architecture alone; other models'
// stacked experts are [E, out, in].
TEST(Layouts, GptOssExpertsFromConfigJson) {
  IO_SEED_TRACE();
  for (const char* cfg :
       {R"({"model_type": "gpt_oss"})", R"({"architectures": ["GptOssForCausalLM"]})",
        R"({"model_type": "mixtral"})"}) {
    TempDir dir;
    write_file(dir / "model.safetensors",
               safetensors_bytes({st("model.layers.0.mlp.experts.down_proj", {2, 32, 64})}));
    write_file(dir / "config.json", Bytes(cfg, cfg + std::strlen(cfg)));
    auto m = io::open_model(dir.path().string());
    const ResolvedLayout& l = info(*m, "model.layers.0.mlp.experts.down_proj").layout;
    const bool oss = std::string(cfg).find("mixtral") == std::string::npos;
    EXPECT_EQ(l.axis.str(), oss ? "1" : "-1") << cfg << ": " << l.reason;
    EXPECT_EQ(l.layout, oss ? "experts [E, in, out]" : "experts [E, out, in]") << cfg;
    EXPECT_FALSE(l.guessed) << cfg;
  }
}

#ifdef CASTSCOPE_HAVE_ONNX
TEST(Layouts, OnnxConsumersDecide) {
  IO_SEED_TRACE();
  TempDir dir;
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  onnx::GraphProto* g = mp.mutable_graph();
  g->set_name("g");
  auto init = [&](const std::string& name, const Shape& s) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : s) t->add_dims(d);
    const Bytes b = f32_bytes(s);
    t->set_raw_data(std::string(b.begin(), b.end()));
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out,
                  const char* attr = nullptr, int64_t v = 0) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    if (attr) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(attr);
      a->set_type(onnx::AttributeProto_AttributeType_INT);
      a->set_i(v);
    }
    return n;
  };
  init("mm", {120, 64});
  init("gt", {32, 64});
  init("ct", {16, 8, 3, 3});
  init("tr", {48, 64});
  init("sh", {64, 64});
  node("MatMul", {"x", "mm"}, "y0");
  node("Gemm", {"x", "gt"}, "y1", "transB", 1);
  node("ConvTranspose", {"img", "ct"}, "y2");
  onnx::NodeProto* t = node("Transpose", {"tr"}, "trT");
  onnx::AttributeProto* perm = t->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto_AttributeType_INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  node("MatMul", {"x", "trT"}, "y3");
  node("MatMul", {"x", "sh"}, "y4");
  node("Gemm", {"x", "sh"}, "y5", "transB", 1);
  const std::string path = dir / "g.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    mp.SerializeToOstream(&f);
  }
  auto m = io::open_model(path);
  EXPECT_EQ(info(*m, "mm").layout.axis.str(), "0");
  EXPECT_EQ(layout_view({120, 64}, info(*m, "mm").layout.axis), (Shape{64, 120}));
  EXPECT_EQ(info(*m, "gt").layout.axis.str(), "-1");
  EXPECT_EQ(info(*m, "ct").layout.axis.str(), ":0");
  EXPECT_EQ(info(*m, "tr").layout.axis.str(), "-1");  // Transpose swaps MatMul's answer
  EXPECT_TRUE(info(*m, "sh").layout.conflict);
  EXPECT_FALSE(info(*m, "mm").layout.guessed);
}
#endif

}  // namespace
}  // namespace castscope::iotest
