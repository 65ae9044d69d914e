// The sizes the app and the CLI announce before an export (the composer's and plan's bits per
// value at the tensor's axis length, the plan totals and the export panel's estimate: all
// ceil(bits · values / 8) per cast tensor, the stored bytes per kept one) equal the bytes each
// layout writes, to within the file's header. Every datatype family and every layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/export.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string name;
  Shape shape;
  std::string dtype;  // "" = keep
};

Tensor random_tensor(const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-4, 4);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = std::ldexp(n(rng), e(rng));
  return t;
}

// What the plan panel, the export panel and `castscope-cli plan` announce for these layers.
uint64_t announced(const std::vector<Layer>& layers, const CastOptions& co) {
  uint64_t total = 0;
  for (const Layer& l : layers) {
    const int64_t n = numel(l.shape);
    if (l.dtype.empty()) {
      total += static_cast<uint64_t>(n) * 4;
      continue;
    }
    const double bits = DataType::parse(l.dtype).bits_per_value(axis_length(co, l.shape));
    total += static_cast<uint64_t>(std::ceil(bits * static_cast<double>(n) / 8.0));
  }
  return total;
}

struct Written {
  uint64_t file = 0, header = 0;  // header: safetensors' 8 + JSON; GGUF: up to the tensor data
};

uint64_t le64(const std::vector<char>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return v;
}

Written measure(const fs::path& p, Layout layout) {
  std::ifstream f(p, std::ios::binary);
  const std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  Written w;
  w.file = b.size();
  if (layout != Layout::GGUF) {
    w.header = 8 + le64(b, 0);
    return w;
  }
  // GGUF v3: magic, version, tensor count, KV count, the KVs, the tensor infos, then padding to
  // general.alignment (32 here). The tensor data starts at the first aligned offset after the
  // infos: the last tensor info's end, found by walking the structure.
  size_t at = 4 + 4;
  const uint64_t nt = le64(b, at), nkv = le64(b, at + 8);
  at += 16;
  auto str = [&]() {
    const uint64_t n = le64(b, at);
    at += 8 + n;
  };
  std::function<void(uint32_t)> value = [&](uint32_t type) {
    static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      str();
    } else if (type == 9) {
      uint32_t et;
      std::memcpy(&et, &b[at], 4);
      const uint64_t n = le64(b, at + 4);
      at += 12;
      for (uint64_t i = 0; i < n; ++i) value(et);
    } else {
      at += sizes[type];
    }
  };
  for (uint64_t i = 0; i < nkv; ++i) {
    str();
    uint32_t type;
    std::memcpy(&type, &b[at], 4);
    at += 4;
    value(type);
  }
  for (uint64_t i = 0; i < nt; ++i) {
    str();
    uint32_t nd;
    std::memcpy(&nd, &b[at], 4);
    at += 4 + 8 * nd + 4 + 8;
  }
  w.header = (at + 31) / 32 * 32;
  return w;
}

ExportPlan plan_of(const std::vector<Layer>& layers) {
  nlohmann::json rules = nlohmann::json::array();
  for (const Layer& l : layers)
    if (!l.dtype.empty()) rules.push_back({{"pattern", l.name}, {"dtype", l.dtype}});
  return parse_plan(nlohmann::json({{"default", "keep"}, {"rules", rules}}).dump(), "sizes");
}

struct LayoutCase {
  Layout layout;
  const char* file;
  std::vector<Layer> layers;
};

std::vector<LayoutCase> layout_cases() {
  // Axes of 288 (nine tiles of 32, two and a part of 128) and conv weights over I·kh·kw = 147
  // (a partial last tile) as well as whole tiles.
  return {
      {Layout::Native,
       "m.safetensors",
       {
           {"std.mxfp6", {64, 288}, "mxfp6e2"},
           {"std.mxfp6.conv", {64, 3, 7, 7}, "mxfp6e2"},
           {"std.fp5", {32, 256}, "e2m2_e8m0_t32"},
           {"std.fp7", {32, 160}, "e3m3_e8m0_t32"},
           {"std.int3", {32, 288}, "int3_float32_t32"},
           {"std.mxfp4", {64, 288}, "mxfp4e2"},
           {"std.nvfp4", {64, 256}, "nvfp4"},
           {"std.mxfp8", {64, 288}, "mxfp8e4"},
           {"std.fp8.channel", {64, 288}, "e4m3fn_float32_t0"},
           {"std.fp8.block", {256, 288}, "e4m3fn_float32_t128_t128"},
           {"std.uint4.zero", {32, 256}, "uint4_fi32"},
           {"std.mx9", {32, 288}, "mx9"},
           {"std.mx6", {32, 288}, "mx6"},
           {"std.mx4", {32, 150}, "mx4"},
           {"std.offsets2", {32, 200}, "e2m1_e32s4o2"},
           {"std.sparse", {32, 288}, "e4m3fn_e8m0_t16n2m4"},
           {"std.sparse.fp6", {32, 150}, "e3m2_e8m0_t32n2m4"},
           {"std.bf16", {32, 288}, "bfloat16"},
           {"codebook.icb44", {32, 288}, "icb44fi_e4m3fn_e8m0_t32s8"},
           {"codebook.partial", {32, 150}, "icb44fi_e4m3fn_e8m0_t32s8"},
           {"tcfp.8", {32, 288}, "tcfp8"},
           {"tcfp.12", {32, 150}, "tcfp12"},
           {"tcfp.16", {32, 288}, "tcfp16"},
           {"ggml.q4_0", {32, 256}, "q4_0"},
           {"ggml.q4_k", {32, 256}, "q4_k"},
           {"ggml.q6_k", {32, 512}, "q6_k"},
           {"ggml.iq4_nl", {32, 256}, "iq4_nl"},
           {"norm.weight", {288}, ""},
       }},
      {Layout::CompressedTensors,
       "m.safetensors",
       {
           {"a.weight", {64, 256}, "nvfp4"},
           {"b.weight", {64, 256}, "mxfp4e2"},
           {"c.weight", {64, 256}, "mxfp8e4"},
           {"d.weight", {64, 256}, "mxfp6e2"},
           {"e.weight", {64, 288}, "e4m3fn_float32_t0"},
           {"f.weight", {256, 288}, "e4m3fn_float32_t128_t128"},
           {"g.weight", {64, 288}, "e4m3fn_float32"},
           {"norm.weight", {256}, ""},
       }},
      {Layout::GptOss,
       "m.safetensors",
       {
           {"experts.gate_up_proj", {4, 128, 256}, "mxfp4e2"},
           {"experts.down_proj", {4, 128, 64}, "mxfp4e2"},
           {"attn.weight", {64, 256}, ""},
       }},
      {Layout::GGUF,
       "m.gguf",
       {
           {"blk.0.q4_0.weight", {32, 256}, "q4_0"},
           {"blk.0.q8_0.weight", {32, 256}, "q8_0"},
           {"blk.0.q4_k.weight", {32, 256}, "q4_k"},
           {"blk.0.q6_k.weight", {32, 256}, "q6_k"},
           {"blk.0.iq4_nl.weight", {32, 256}, "iq4_nl"},
           {"blk.0.mxfp4.weight", {32, 256}, "mxfp4e2"},
           {"blk.0.f16.weight", {32, 256}, "float16"},
           {"blk.0.bf16.weight", {32, 256}, "bfloat16"},
           {"output_norm.weight", {256}, ""},
       }},
  };
}

TEST(AnnouncedSizes, EqualTheBytesEveryLayoutWrites) {
  const uint64_t seed = castscope::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set CASTSCOPE_TEST_SEED to repeat)");
  std::mt19937_64 rng(seed + 3800);
  const fs::path dir =
      fs::temp_directory_path() / ("castscope_sizes_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const LayoutCase& c : layout_cases()) {
    SCOPED_TRACE(to_string(c.layout));
    MemoryModel m;
    for (const Layer& l : c.layers) m.add(l.name, random_tensor(l.shape, rng));
    ExportOptions eo;
    eo.layout = c.layout;
    eo.cast.device = Device::CPU;
    AxisSpec::parse("auto").apply(eo.cast);
    const fs::path out = dir / (std::string(to_string(c.layout)) + "-" + c.file);
    const ExportReport rep = export_model(m, out.string(), plan_of(c.layers), eo);
    const Written w = measure(out, c.layout);
    const uint64_t want = announced(c.layers, eo.cast);
    const uint64_t data = w.file - w.header;
    std::printf("%-18s announced %8llu bytes, wrote %8llu of data + %5llu of header\n",
                to_string(c.layout), static_cast<unsigned long long>(want),
                static_cast<unsigned long long>(data), static_cast<unsigned long long>(w.header));
    // The data differs from the announcement by at most the file's header (tensor scales of
    // four bytes, a per-tensor byte of rounding), and the export's own total is the data.
    EXPECT_LE(data > want ? data - want : want - data, w.header)
        << "announced " << want << " bytes, wrote " << data << " bytes of data + " << w.header
        << " of header";
    EXPECT_LE(w.file - want, 2 * w.header);
    if (c.layout != Layout::GGUF) EXPECT_EQ(rep.bytes_out, data);
    // Per tensor: what the report says each tensor took against its announcement.
    for (size_t i = 0; i < c.layers.size(); ++i) {
      const Layer& l = c.layers[i];
      const uint64_t one = announced({l}, eo.cast);
      const ExportedTensor* t = nullptr;
      for (const ExportedTensor& e : rep.tensors)
        if (e.name == l.name) t = &e;
      ASSERT_NE(t, nullptr) << l.name;
      EXPECT_LE(t->bytes_out > one ? t->bytes_out - one : one - t->bytes_out, 8u)
          << l.name << " (" << (l.dtype.empty() ? "keep" : l.dtype) << "): announced " << one
          << ", wrote " << t->bytes_out;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
