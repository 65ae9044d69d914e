// general.file_type of a GGUF export: llama.cpp's LLAMA_FTYPE of the file's dominant quantized
// type (llama.cpp reports it as the model's quantization), replacing the source's in place.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path dir;
  Dir() {
    dir = fs::temp_directory_path() / ("castscope_ftype_" + std::to_string(::getpid()) + "_" +
                                       std::to_string(castscope::test::test_seed() % 1000000));
    fs::create_directories(dir);
  }
  ~Dir() { fs::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

Tensor random_tensor(Shape shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> n(0.0f, 1.0f);
  float* p = t.mutable_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = n(rng);
  return t;
}

struct Case {
  const char* what;
  std::vector<std::pair<Shape, std::string>> tensors;  // shape and datatype ("keep": float32)
  uint64_t ftype;
};

// The file type written for tensors t0, t1, ... cast as the case says.
uint64_t file_type_of(const Case& c, std::mt19937_64& rng, const Dir& dir) {
  MemoryModel m;
  nlohmann::json plan = {{"default", "keep"}, {"rules", nlohmann::json::array()}};
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const std::string name = "t" + std::to_string(i);
    m.add(name, random_tensor(c.tensors[i].first, rng));
    if (c.tensors[i].second != "keep")
      plan["rules"].push_back({{"pattern", name}, {"dtype", c.tensors[i].second}});
  }
  export_model(m, dir / "m.gguf", parse_plan(plan.dump(), "plan.json"),
               ExportOptions{Layout::GGUF});
  const auto g = exporttest::read_gguf(dir / "m.gguf");
  return g.uints.count("general.file_type") ? g.uints.at("general.file_type") : 9999;
}

}  // namespace

TEST(ExportGguf, FileTypeIsTheDominantQuantizedType) {
  const uint64_t seed = castscope::test::test_seed();
  std::mt19937_64 rng(seed);
  Dir dir;
  const Case cases[] = {
      // Elements decide, not tensor counts; kept float32 tensors do not count against blocks.
      {"iq4_nl most", {{{4, 256}, "q4_k"}, {{8, 256}, "iq4_nl"}, {{16, 256}, "keep"}}, 25},
      {"q4_k most", {{{4, 256}, "q4_k"}, {{1, 256}, "iq4_nl"}, {{1, 256}, "iq4_nl"}}, 15},
      {"a tie: the first", {{{4, 256}, "q6_k"}, {{4, 256}, "q4_0"}}, 18},
      {"q8_0 either way", {{{4, 64}, "int8_f32"}, {{2, 64}, "q8_0"}, {{9, 64}, "float16"}}, 7},
      {"mxfp4 (OCP)", {{{4, 64}, "mxfp4e2"}, {{2, 64}, "q5_1"}}, 38},
      {"mxfp4 (ggml)", {{{4, 64}, "mxfp4_ggml"}, {{2, 64}, "q5_0"}}, 38},
      {"q2_k, q3_k, q5_k", {{{1, 256}, "q2_k"}, {{2, 256}, "q3_k"}, {{3, 256}, "q5_k"}}, 17},
      {"tq1_0", {{{1, 256}, "tq1_0"}}, 36},
      {"iq4_xs", {{{1, 256}, "iq4_xs"}, {{1, 256}, "q4_1"}}, 30},
      // No block type: the float type holding the most elements.
      {"float16", {{{8, 32}, "float16"}, {{4, 32}, "keep"}}, 1},
      {"bfloat16", {{{9, 32}, "bfloat16"}, {{8, 32}, "float16"}}, 32},
      {"float32", {{{8, 32}, "keep"}, {{1, 32}, "float16"}}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(file_type_of(c, rng, dir), c.ftype) << "seed " << seed;
  }
}

// A GGUF source's general.file_type is replaced in its place (once), not kept or repeated.
TEST(ExportGguf, FileTypeOfAGgufSourceIsReplaced) {
  std::mt19937_64 rng(castscope::test::test_seed());
  Dir dir;
  MemoryModel m;
  m.add("a", random_tensor({4, 256}, rng));
  m.add("b", random_tensor({2, 256}, rng));
  auto plan = [](const char* a, const char* b) {
    nlohmann::json j = {
        {"default", "keep"},
        {"rules", {{{"pattern", "a"}, {"dtype", a}}, {{"pattern", "b"}, {"dtype", b}}}}};
    return parse_plan(j.dump(), "plan.json");
  };
  export_model(m, dir / "first.gguf", plan("float16", "float16"), ExportOptions{Layout::GGUF});
  ASSERT_EQ(exporttest::read_gguf(dir / "first.gguf").uints.at("general.file_type"), 1u);
  auto src = io::open_model(dir / "first.gguf");
  export_model(*src, dir / "second.gguf", plan("q6_k", "q4_0"), ExportOptions{Layout::GGUF});
  const auto g = exporttest::read_gguf(dir / "second.gguf");
  EXPECT_EQ(g.uints.at("general.file_type"), 18u);  // MOSTLY_Q6_K
  size_t n = 0;
  for (size_t p = g.all.find("general.file_type"); p != std::string::npos;
       p = g.all.find("general.file_type", p + 1))
    ++n;
  EXPECT_EQ(n, 1u);
  // Keeping every tensor keeps the F16 blocks, and the file type says so.
  export_model(*src, dir / "third.gguf",
               parse_plan(R"({"default": "keep", "rules": []})", "plan.json"),
               ExportOptions{Layout::GGUF});
  EXPECT_EQ(exporttest::read_gguf(dir / "third.gguf").uints.at("general.file_type"), 1u);
}
