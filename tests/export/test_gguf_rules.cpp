// What a GGUF export must hold for llama.cpp to run it, and how it names itself: 1-D tensors
// (norms, biases) stay float32 as llama-quantize leaves them, and general.file_type follows
// llama.cpp's naming of the mix (Q4_K_S 14, where the dominant type alone says Q4_K_M 15).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <cstring>
#include <random>
#include <string>

#include "castscope/error.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "export_test_util.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

struct Dir : exporttest::ScratchDir {
  Dir() : ScratchDir("castscope_ggufrules_") {}
};

Tensor random_tensor(Shape shape, std::mt19937_64& rng, DType dt = DType::F32) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> n(1.0f, 0.1f);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = n(rng);
  return dt == DType::F32 ? t : exportdetail::to_storage(t, dt);
}

ExportPlan plan_of(const nlohmann::json& rules) {
  return parse_plan(nlohmann::json{{"default", "keep"}, {"rules", rules}}.dump(), "plan.json");
}

const exporttest::GgufTensor& tensor(const exporttest::GgufFile& g, const std::string& name) {
  for (const auto& t : g.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

}  // namespace

// A plan that casts the norms to float16, bfloat16 or a block type writes them float32 (the
// source values, uncast), a bfloat16 source norm too; kept tensors keep their stored type.
TEST(ExportGgufRules, OneDimensionalTensorsStayFloat32) {
  std::mt19937_64 rng(castscope::test::test_seed());
  Dir dir;
  MemoryModel m;
  const Tensor n1 = random_tensor({256}, rng), n2 = random_tensor({256}, rng),
               n3 = random_tensor({256}, rng, DType::BF16);
  m.add("blk.0.attn_norm.weight", n1);
  m.add("blk.0.ffn_norm.weight", n2);
  m.add("output_norm.weight", n3);
  m.add("blk.0.attn_q.weight", random_tensor({4, 256}, rng));
  const Tensor kept = random_tensor({256}, rng, DType::BF16);
  m.add("kept.bias", kept);
  const ExportPlan p = plan_of({{{"pattern", "kept.*"}, {"dtype", "keep"}},
                                {{"pattern", "*attn_norm*"}, {"dtype", "float16"}},
                                {{"pattern", "*ffn_norm*"}, {"dtype", "q8_0"}},
                                {{"pattern", "*"}, {"dtype", "q4_k"}}});
  const ExportReport rep = export_model(m, dir / "m.gguf", p, ExportOptions{Layout::GGUF});
  const auto g = exporttest::read_gguf(dir / "m.gguf");
  for (const char* name :
       {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(tensor(g, name).type, 0u);  // F32
  }
  EXPECT_EQ(tensor(g, "blk.0.attn_q.weight").type, 12u);  // Q4_K: 2-D tensors are cast
  EXPECT_EQ(std::memcmp(tensor(g, "blk.0.attn_norm.weight").data, n1.data(), 256 * 4), 0);
  const Tensor n3f = n3.to_f32();
  EXPECT_EQ(std::memcmp(tensor(g, "output_norm.weight").data, n3f.data(), 256 * 4), 0);
  EXPECT_EQ(tensor(g, "kept.bias").type, 30u);  // BF16, as stored
  EXPECT_EQ(std::memcmp(tensor(g, "kept.bias").data, kept.data(), 256 * 2), 0);
  for (const ExportedTensor& t : rep.tensors)
    if (t.shape.size() == 1 && t.name != "kept.bias") EXPECT_EQ(t.dtype, "keep:F32") << t.name;
}

// Q4_K dominant: Q5_K on the mix's attn_v / ffn_down without Q6_K is llama.cpp's Q4_K_S (14),
// Q6_K there its Q4_K_M (15); output.weight and token_embd follow their own options, not the mix.
TEST(ExportGgufRules, FileTypeNamesTheMix) {
  std::mt19937_64 rng(castscope::test::test_seed() + 1);
  Dir dir;
  auto ftype = [&](const char* attn_v, const char* output, const std::string& named = "") {
    MemoryModel m;
    m.add("blk.0.attn_q.weight", random_tensor({8, 256}, rng));
    m.add("blk.0.attn_v.weight", random_tensor({2, 256}, rng));
    m.add("output.weight", random_tensor({2, 256}, rng));
    ExportOptions o{Layout::GGUF};
    o.gguf_file_type = named;
    export_model(m, dir / "m.gguf",
                 plan_of({{{"pattern", "*attn_q*"}, {"dtype", "q4_k"}},
                          {{"pattern", "*attn_v*"}, {"dtype", attn_v}},
                          {{"pattern", "output.weight"}, {"dtype", output}}}),
                 o);
    return exporttest::read_gguf(dir / "m.gguf").uints.at("general.file_type");
  };
  EXPECT_EQ(ftype("q5_k", "q6_k"), 14u);  // Q4_K_S
  EXPECT_EQ(ftype("q6_k", "q6_k"), 15u);  // Q4_K_M
  EXPECT_EQ(ftype("q4_k", "q6_k"), 15u);  // plain Q4_K: llama-quantize's "Q4_K" is Q4_K_M
  EXPECT_EQ(ftype("q5_k", "q5_k"), 14u);
  // Named: llama.cpp's name, whatever the tensors.
  EXPECT_EQ(ftype("q4_k", "q6_k", "Q4_K_S"), 14u);
  EXPECT_EQ(ftype("q4_k", "q6_k", "IQ2_M"), 29u);
  try {
    ftype("q4_k", "q6_k", "Q4_K_X");
    ADD_FAILURE() << "an unknown file type name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K_X"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Q4_K_S"), std::string::npos) << e.what();
  }
}
