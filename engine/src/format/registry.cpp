#include <cctype>
#include <utility>

#include "castscope/datatype.hpp"

namespace castscope {
namespace {

std::vector<RegistryEntry> build() {
  std::vector<RegistryEntry> r;
  auto add = [&](std::string name, std::string spec, std::string group, std::string desc) {
    r.push_back({std::move(name), std::move(spec), std::move(group), std::move(desc)});
  };
  const std::string mx = "MX (OCP)";
  add("mxfp8e5", "e5m2_e8m0_t32", mx, "OCP MXFP8 E5M2: e8m0 scale per 32 values");
  add("mxfp8e4", "e4m3fn_e8m0_t32", mx, "OCP MXFP8 E4M3: e8m0 scale per 32 values");
  add("mxfp6e3", "e3m2fnuz_e8m0_t32", mx, "OCP MXFP6 E3M2");
  add("mxfp6e2", "e2m3fnuz_e8m0_t32", mx, "OCP MXFP6 E2M3");
  add("mxfp4e2", "e2m1fnuz_e8m0_t32", mx, "OCP MXFP4 E2M1");
  add("mxfp5e2", "e2m2fnuz_e8m0_t32", mx, "MXFP5 E2M2 (TensorCast): e8m0 scale per 32 values");
  add("mxint8", "int8_e8m0_t32", mx, "OCP MXINT8: fixed point q/64 with an e8m0 scale per 32");
  add("mxint4", "int4_e8m0_t32", mx, "MXINT4: fixed point q/4 with an e8m0 scale per 32");
  add("bfp16", "int8_e8m0_t8", mx, "block floating point: int8 with an e8m0 scale per 8");
  const std::string nv = "NVIDIA / FP8 recipes";
  add("nvfp4", "e2m1fnuz_e4m3fn_float32_t16", nv,
      "NVFP4: e2m1 values, e4m3 scale per 16, fp32 tensor scale");
  add("fp8e4_tensor", "e4m3fn_float32", nv,
      "FP8 E4M3 with one fp32 scale per tensor (cuBLASLt per-tensor recipe)");
  add("fp8e5_tensor", "e5m2_float32", nv, "FP8 E5M2 with one fp32 scale per tensor");
  add("fp8e4_channel", "e4m3fn_float32_t0", nv, "FP8 E4M3 with one fp32 scale per channel (row)");
  add("fp8e4_block128", "e4m3fn_float32_t128_t128", nv,
      "FP8 E4M3 with an fp32 scale per 128x128 block");
  const std::string smx = "shared microexponents";
  add("mx9", "int8_e8m0_t16s2o1", smx,
      "MX9: 7-bit magnitudes, 8-bit exponent per 16, 1-bit microexponent per pair");
  add("mx6", "int5_e8m0_t16s2o1", smx,
      "MX6: 4-bit magnitudes, 8-bit exponent per 16, 1-bit microexponent per pair");
  add("mx4", "int3_e8m0_t16s2o1", smx,
      "MX4: 2-bit magnitudes, 8-bit exponent per 16, 1-bit microexponent per pair");
  const std::string off = "subtile offsets (TensorCast)";
  for (const char* t : {"s8o1", "s4o1", "s8o2", "s4o2"})
    add(std::string("e2m1_e32") + t, std::string("e2m1fnuz_e8m0_t32") + t, off,
        std::string("e2m1, e8m0 scale per 32, subtiles of ") + t[1] + " each " + t[3] +
            " bit(s) of exponent offset below it");
  const std::string tc = "TCFP";
  add("tcfp8", "tcfp8", tc, "TCFP-8: e4m3fn + e8m0 block scale per 32, chosen at 3 sigma");
  add("tcfp12", "tcfp12", tc, "TCFP-12: e4m3fn + 4-bit residual, two block scales per 32");
  add("tcfp16", "tcfp16", tc, "TCFP-16: two e4m3fn terms, two block scales per 32");
  // ggml's block formats (GGUF types of the same names), cast as llama.cpp's quantizer does.
  const std::string gg = kGgmlGroup;
  add("q4_0", "q4_0", gg, "ggml Q4_0: 4-bit codes, fp16 scale per 32 (signed max / -8)");
  add("q4_1", "q4_1", gg, "ggml Q4_1: 4-bit codes, fp16 scale and fp16 minimum per 32");
  add("q5_0", "q5_0", gg, "ggml Q5_0: 5-bit codes, fp16 scale per 32 (signed max / -16)");
  add("q5_1", "q5_1", gg, "ggml Q5_1: 5-bit codes, fp16 scale and fp16 minimum per 32");
  add("q8_0", "q8_0", gg, "ggml Q8_0: int8 codes, fp16 scale per 32 (max / 127, unrounded)");
  add("q2_k", "q2_k", gg, "ggml Q2_K: 2-bit codes, 4-bit scales and minimums per 16, fp16 per 256");
  add("q3_k", "q3_k", gg, "ggml Q3_K: 3-bit codes, 6-bit scales per 16, fp16 per 256");
  add("q4_k", "q4_k", gg, "ggml Q4_K: 4-bit codes, 6-bit scales and minimums per 32, fp16 per 256");
  add("q5_k", "q5_k", gg, "ggml Q5_K: 5-bit codes, 6-bit scales and minimums per 32, fp16 per 256");
  add("q6_k", "q6_k", gg, "ggml Q6_K: 6-bit codes, 8-bit scales per 16, fp16 per 256");
  add("iq4_nl", "iq4_nl", gg,
      "ggml IQ4_NL: 4-bit non-linear codes (-127 ... 113), fp16 scale per 32 (15 scales tried)");
  add("iq4_xs", "iq4_xs", gg, "ggml IQ4_XS: IQ4_NL codes, 6-bit scales per 32, fp16 per 256");
  add("tq1_0", "tq1_0", gg, "ggml TQ1_0: ternary, 5 trits a byte, fp16 scale per 256");
  add("tq2_0", "tq2_0", gg, "ggml TQ2_0: ternary, 2 bits each, fp16 scale per 256");
  add("mxfp4_ggml", "mxfp4_ggml", gg,
      "ggml MXFP4: e2m1, e8m0 scale per 32, as llama.cpp quantizes (ties down, no -0)");
  add("nvfp4_ggml", "nvfp4_ggml", gg,
      "ggml NVFP4: e2m1, ue4m3 scale per 16 (max / 6, rounded half up), no tensor scale");
  add("q1_0", "q1_0", gg, "ggml Q1_0: signs, fp16 scale per 128 (mean |x|)");

  // TensorCast's implicit codebooks: f (fp4) and i (int4) patterns, eight shifts each, over an
  // FP8 / FP6 compute format; e32 = e8m0 scale per 32, f32 = e5m0 per tile or e5m3 with subtiles.
  const std::string cbg = "codebooks (TensorCast)";
  const std::pair<const char*, const char*> computes[] = {
      {"4", "e4m3fn"}, {"3", "e3m2fnuz"}, {"2", "e2m3fnuz"}};
  for (const auto& [digit, compute] : computes)
    for (const char* sub : {"", "s16", "s8", "s4"})
      for (bool e : {true, false}) {
        const std::string scale = e ? "e8m0" : (*sub ? "e5m3" : "e5m0");
        add(std::string("icb44fi") + digit + (e ? "_e32" : "_f32") + sub,
            std::string("icb44fi_") + compute + "_" + scale + "_t32" + sub, cbg,
            std::string("4-bit indices into 16 fp4/int4 mappings of ") + compute + ", " + scale +
                " scale per 32" + (*sub ? std::string(", mapping per ") + (sub + 1) : ""));
      }

  // Integer families, named as TensorCast does: letters for the scale (and zero point) types,
  // then the scope: nothing for a tensor scale, 'c' for a channel, the tile size for tiles.
  struct Letter {
    char c;
    const char* spec;
  };
  const Letter scales[] = {{'f', "float16"}, {'b', "bfloat16"}, {'s', "float32"}, {'e', "e8m0"}};
  const Letter zeros[] = {{'f', "float16"}, {'b', "bfloat16"}, {'s', "float32"}, {'i', "int8"}};
  struct Scope {
    const char* suffix;
    const char* tile;
    const char* group;
  };
  const Scope scopes[] = {
      {"", "", "tensor-scaled"}, {"c", "_t0", "channel-scaled"}, {"32", "_t32", "tile-scaled"}};
  for (const Scope& sc : scopes) {
    for (const char* data : {"int8", "int4", "int16"}) {
      if (std::string(data) == "int16" && std::string(sc.suffix) == "32") continue;
      for (const Letter& s : scales) {
        if (s.c == 'e' && std::string(sc.suffix) == "32") continue;  // that is mxint8 / mxint4
        // TensorCast's int4_f32 has a 9-bit e5m3 scale (its 'f' for tiles), not float16.
        if (std::string(data) == "int4" && s.c == 'f' && std::string(sc.suffix) == "32") {
          add("int4_f32", "int4_e5m3_t32", std::string(sc.group) + " int",
              "symmetric int4 with an e5m3 scale per 32 (TensorCast's int4_f32)");
          continue;
        }
        add(std::string(data) + "_" + s.c + sc.suffix, std::string(data) + "_" + s.spec + sc.tile,
            std::string(sc.group) + " int",
            "symmetric " + std::string(data) + " with a " + s.spec + " scale");
      }
    }
    for (const char* data : {"uint8", "uint4", "uint16"}) {
      if (std::string(data) == "uint16" && std::string(sc.suffix) == "32") continue;
      for (const Letter& s : scales) {
        if (s.c == 'e') continue;
        for (const Letter& z : zeros) {
          if (z.c != 'i' && z.c != s.c) continue;  // zero point in the scale's type, or int8
          add(std::string(data) + "_" + s.c + z.c + sc.suffix,
              std::string(data) + "_" + s.spec + "_" + z.spec + sc.tile,
              std::string(sc.group) + " uint",
              "asymmetric " + std::string(data) + ", " + s.spec + " scale, " + z.spec +
                  " zero point");
        }
      }
    }
  }
  for (const char* f : {"e4m3fn", "e5m2", "e3m2fnuz", "e2m3fnuz"})
    add(std::string(f) + "_e", std::string(f) + "_e8m0", "tensor-scaled float",
        std::string(f) + " with one e8m0 scale per tensor");

  // TensorCast's own names for the same families, with its meanings (tcast/__init__.py): 'z' is
  // an fnuz format, 'f' a 9-bit e5m3 scale, 'e32' an e8m0 scale per 32, e1mYb1 the integer
  // int(Y+2). Its uint8_* names build uint16 there, a slip: here they mean uint8 (above).
  const std::string tcn = "TensorCast names";
  const std::pair<const char*, const char*> tensorcast[] = {
      {"e5m2z_e", "e5m2fnuz_e8m0"},      {"e4m3_e", "e4m3fn_e8m0"},
      {"e4m3z_e", "e4m3fnuz_e8m0"},      {"e3m2_e", "e3m2fnuz_e8m0"},
      {"e2m3_e", "e2m3fnuz_e8m0"},       {"uint4_f12i432", "uint4_e5m6_int4_t32"},
      {"e1m6b1_e32", "int8_e8m0_t32"},   {"e1m2b1_e32", "int4_e8m0_t32"},
      {"e1m2b1_f32", "int4_e5m3_t32"},   {"e2m1_f32", "e2m1fnuz_e5m3_t32"},
      {"e3m2_f32", "e3m2fnuz_e5m3_t32"}, {"e2m3_f32", "e2m3fnuz_e5m3_t32"},
      {"e4m3_f32", "e4m3fn_e5m3_t32"},
  };
  for (const auto& [name, spec] : tensorcast)
    add(name, spec, tcn, std::string("TensorCast's ") + name + ": " + spec);

  const std::string un = "unscaled";
  add("float32", "float32", un, "IEEE binary32");
  add("float16", "float16", un, "IEEE binary16");
  add("bfloat16", "bfloat16", un, "bfloat16 (8 exponent, 7 mantissa bits)");
  add("float8_e4m3fn", "e4m3fn", un, "FP8 E4M3 (OCP / NVIDIA), max 448, no Inf");
  add("float8_e5m2", "e5m2", un, "FP8 E5M2 (OCP / NVIDIA), IEEE-like");
  add("float8_e4m3fnuz", "e4m3b8fnuz", un, "FP8 E4M3 FNUZ (Graphcore / AMD), bias 8, max 240");
  add("float8_e5m2fnuz", "e5m2b16fnuz", un, "FP8 E5M2 FNUZ, bias 16");
  add("binary8p3", "e5m2b16fnuz", un, "IEEE P3109 binary8p3 (TensorCast): e5m2, bias 16, fnuz");
  add("binary8p4", "e4m3b8fnuz", un, "IEEE P3109 binary8p4 (TensorCast): e4m3, bias 8, fnuz");
  add("binary8p5", "e3m4b4fnuz", un, "IEEE P3109 binary8p5 (TensorCast): e3m4, bias 4, fnuz");
  add("e3m2fnuz", "e3m2fnuz", un, "OCP FP6 E3M2 (TensorCast's spelling): no NaN, no Inf, -0 kept");
  add("e2m3fnuz", "e2m3fnuz", un, "OCP FP6 E2M3 (TensorCast's spelling): no NaN, no Inf, -0 kept");
  add("e2m1fnuz", "e2m1fnuz", un, "OCP FP4 E2M1 (TensorCast's spelling): no NaN, no Inf, -0 kept");
  add("e2m1", "e2m1fnuz", un, "OCP FP4 E2M1: no NaN, no Inf, -0 kept");
  return r;
}

}  // namespace

const std::vector<RegistryEntry>& registry() {
  static const std::vector<RegistryEntry> r = build();
  return r;
}

const RegistryEntry* find_registry(std::string_view name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const RegistryEntry& e : registry())
    if (e.name == n) return &e;
  return nullptr;
}

}  // namespace castscope
