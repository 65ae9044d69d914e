// compressed-tensors checkpoints (llm-compressor's output; quant_method "compressed-tensors"):
// pack-quantized (int1..8 densely packed in I32, `weight_shape`, optional packed
// `weight_zero_point`, `weight_g_idx`), naive / int / float-quantized (`weight` I8 / F8_E4M3 and
// `weight_scale` per tensor, channel, group or block), nvfp4-pack-quantized (`weight_packed` U8,
// F8_E4M3 `weight_scale` per 16, `weight_global_scale` = 448*6/amax, divided), mxfp4-pack-quantized
// and mxfp8-quantized (U8 E8M0 `weight_scale` per 32). Values follow compressed-tensors'
// `dequantize` operation for operation: (code - zero) * scale in the scale's dtype (one rounding
// of an exact float32 product), NVFP4's scale / global_scale in float32 and the product rounded
// to bfloat16, MX scales 2^(e-127) in bfloat16.
#include <regex>

#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

namespace {

struct Args {
  std::string group;  // config_groups key
  std::string format;
  std::vector<std::string> targets;
  int bits = 8;
  std::string type = "int";  // int | float
  bool symmetric = true;
  std::string strategy = "tensor";
  int64_t group_size = 0;
  int64_t bh = 0, bw = 0;  // block_structure
};

std::vector<Args> read_groups(const Source& src) {
  std::vector<Args> out;
  const std::string global = src.q.value("format", std::string());
  if (!src.q.contains("config_groups") || !src.q["config_groups"].is_object())
    throw Error("'" + src.file + "': compressed-tensors quantization_config has no config_groups");
  for (auto it = src.q["config_groups"].begin(); it != src.q["config_groups"].end(); ++it) {
    const json& g = it.value();
    if (!g.is_object() || !g.contains("weights") || !g["weights"].is_object()) continue;
    const json& w = g["weights"];
    Args a;
    a.group = it.key();
    a.format =
        g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>() : global;
    if (g.contains("targets") && g["targets"].is_array())
      for (const json& t : g["targets"])
        if (t.is_string()) a.targets.push_back(t.get<std::string>());
    try {
      a.bits = w.value("num_bits", 8);
      a.type = w.value("type", std::string("int"));
      a.symmetric = w.value("symmetric", true);
      a.strategy = w.value("strategy", std::string("tensor"));
      if (w.contains("group_size") && w["group_size"].is_number_integer())
        a.group_size = w["group_size"].get<int64_t>();
      if (w.contains("block_structure") && w["block_structure"].is_array() &&
          w["block_structure"].size() == 2) {
        a.bh = w["block_structure"][0].get<int64_t>();
        a.bw = w["block_structure"][1].get<int64_t>();
      }
    } catch (const json::exception& e) {
      throw Error("'" + src.file + "': config_groups." + a.group + ".weights: " + e.what());
    }
    if (a.bits < 1 || a.bits > 8 || a.group_size < 0 || a.bh < 0 || a.bw < 0)
      throw Error("'" + src.file + "': config_groups." + a.group +
                  ".weights: num_bits, group_size or block_structure out of range");
    out.push_back(a);
  }
  if (out.empty())
    throw Error("'" + src.file + "': compressed-tensors config_groups quantize no weights");
  return out;
}

// The group whose scheme quantized module `module` stored in `format`: the only one, or the one
// whose "re:" target matches, or the only one of that format.
const Args& scheme_for(const std::vector<Args>& groups, const std::string& module,
                       const std::string& format, const Source& src) {
  if (groups.size() == 1) return groups[0];
  std::vector<const Args*> fit;
  for (const Args& g : groups)
    for (const std::string& t : g.targets)
      if (t.rfind("re:", 0) == 0 && std::regex_match(module, std::regex(t.substr(3)))) {
        fit.push_back(&g);
        break;
      }
  if (fit.size() == 1) return *fit[0];
  fit.clear();
  for (const Args& g : groups)
    if (g.format == format) fit.push_back(&g);
  if (fit.size() == 1) return *fit[0];
  throw Error("'" + src.file + "': cannot tell which of its config_groups quantized '" + module +
              "' (stored " + format + ")");
}

// Unpacks compressed-tensors' int32 packing of `n` values of `bits` along a line whose words
// are `stride` apart: densely (value i at bit i*bits, across words) or, before its 2026-06
// change, 32/bits whole values per word.
int code_at(const int32_t* words, int64_t stride, int64_t i, int bits, bool dense) {
  const uint32_t mask = (1u << bits) - 1;
  uint32_t v;
  if (dense) {
    const int64_t bit = i * bits, w = bit / 32;
    const int off = static_cast<int>(bit % 32);
    v = static_cast<uint32_t>(words[w * stride]) >> off;
    if (off + bits > 32) v |= static_cast<uint32_t>(words[(w + 1) * stride]) << (32 - off);
  } else {
    const int per = 32 / bits;
    v = static_cast<uint32_t>(words[(i / per) * stride]) >> ((i % per) * bits);
  }
  return static_cast<int>(v & mask) - (1 << (bits - 1));
}

// Which packing `words` words for `n` values of `bits` show; throws when neither fits.
bool dense_packing(int64_t words, int64_t n, int bits, const Entry& e) {
  const int64_t dense = (n * bits + 31) / 32, old = (n + 32 / bits - 1) / (32 / bits);
  if (words == dense) return true;
  if (words == old) return false;
  throw Error(where_entry(e) + "packed length " + std::to_string(words) + " does not hold " +
              std::to_string(n) + " values of " + std::to_string(bits) + " bits (expected " +
              std::to_string(dense) + " words" +
              (old != dense ? " or, packed before compressed-tensors 0.11's dense packing, " +
                                  std::to_string(old)
                            : std::string()) +
              ")");
}

// The scale grid of a [rows, cols] weight under `a`: scale rows, scale columns and the columns
// and rows each covers.
struct Grid {
  int64_t sr = 1, sc = 1, th = 1, tw = 1;
};
Grid grid_for(const Args& a, int64_t rows, int64_t cols, const Entry& scale) {
  Grid g;
  const Shape& s = scale.info.shape;
  if (a.strategy == "tensor" || a.strategy == "tensor_group") {
    if (a.strategy == "tensor") {
      if (numel(s) != 1)
        throw Error(where_entry(scale) + "a per-tensor scale has shape " + shape_str(s));
      g.th = rows;
      g.tw = cols;
      return g;
    }
  }
  if (a.strategy == "channel") {
    g.sr = rows;
    g.tw = cols;
  } else if (a.strategy == "group" || a.strategy == "tensor_group") {
    if (a.group_size <= 0 || cols % a.group_size != 0)
      throw Error(where_entry(scale) + "group size " + std::to_string(a.group_size) +
                  " does not divide the " + std::to_string(cols) + " columns");
    g.sr = rows;
    g.sc = cols / a.group_size;
    g.tw = a.group_size;
  } else if (a.strategy == "block") {
    if (a.bh <= 0 || a.bw <= 0) throw Error(where_entry(scale) + "block strategy without blocks");
    g.th = a.bh;
    g.tw = a.bw;
    g.sr = (rows + a.bh - 1) / a.bh;
    g.sc = (cols + a.bw - 1) / a.bw;
  } else {
    throw Error(where_entry(scale) + "weight strategy '" + a.strategy + "' is not read");
  }
  if (numel(s) != g.sr * g.sc || (s.size() == 2 && (s[0] != g.sr || s[1] != g.sc)))
    throw Error(where_entry(scale) + "scale shape " + shape_str(s) + " does not tile the [" +
                std::to_string(rows) + ", " + std::to_string(cols) + "] weight (" + a.strategy +
                " strategy: expected [" + std::to_string(g.sr) + ", " + std::to_string(g.sc) +
                "])");
  return g;
}

std::string tile_suffix(const Args& a, const Grid& g) {
  if (a.strategy == "tensor") return "";
  if (a.strategy == "channel") return "_t0";
  if (a.strategy == "block") return "_t" + std::to_string(g.th) + "_t" + std::to_string(g.tw);
  return "_t" + std::to_string(g.tw);
}

struct Module {
  std::string prefix;  // "model.layers.0.mlp.down_proj"
  const Entry* codes;
  const Entry* scale;
};

// Activation companions that belong to the module, not to its weight's values.
void drop_activation_parts(Parts& parts, const std::string& prefix) {
  for (const char* s : {"input_global_scale", "input_scale", "input_zero_point", "output_scale",
                        "output_zero_point", "k_scale", "v_scale"})
    parts.drop(prefix + "." + s);
}

void fold_packed_int(const Source& src, Parts& parts, const Module& m, const Args& a) {
  const std::string wn = m.prefix + ".weight";
  const Entry& shape_e = parts.need(m.prefix + ".weight_shape", wn, src);
  expect_dtype(*m.codes, {"I32"}, "weight_packed");
  expect_dtype(shape_e, {"I64", "I32"}, "weight_shape");
  const Tensor st = raw(shape_e).to_f32();
  Shape shape;
  for (int64_t i = 0; i < st.numel(); ++i)
    shape.push_back(static_cast<int64_t>(st.ptr<float>()[i]));
  if (shape.size() < 2)
    throw Error(where_entry(shape_e) + "weight_shape " + shape_str(shape) +
                " is not a matrix shape");
  checked_numel(shape, shape_e.info.file, shape_e.info.name);
  const int64_t cols = shape.back(), rows = numel(shape) / std::max<int64_t>(cols, 1);
  const Shape& ps = m.codes->info.shape;
  if (ps.size() != shape.size() || numel(ps) / std::max<int64_t>(ps.back(), 1) != rows)
    throw Error(where_entry(*m.codes) + "packed shape " + shape_str(ps) +
                " disagrees with weight_shape " + shape_str(shape));
  const bool dense = dense_packing(ps.back(), cols, a.bits, *m.codes);
  const Grid g = grid_for(a, rows, cols, *m.scale);
  expect_dtype(*m.scale, {"BF16", "F16", "F32"}, "weight_scale");
  std::vector<const Entry*> used = {m.codes, m.scale, &shape_e};
  const Entry* zp = nullptr;
  if (!a.symmetric) {
    zp = &parts.need(m.prefix + ".weight_zero_point", wn, src);
    expect_dtype(*zp, {"I32", "I8"}, "weight_zero_point");
    used.push_back(zp);
  }
  const Entry* gidx = parts.find(m.prefix + ".weight_g_idx");
  if (gidx) {
    expect_dtype(*gidx, {"I32", "I64"}, "weight_g_idx");
    expect_shape(*gidx, {cols}, "weight_g_idx");
    used.push_back(gidx);
  }
  const std::string sd = m.scale->info.dtype;
  const int bits = a.bits;
  const Entry codes = *m.codes, scale = *m.scale;
  const Entry zpe = zp ? *zp : Entry{}, ge = gidx ? *gidx : Entry{};
  const bool has_zp = zp != nullptr, has_g = gidx != nullptr;
  // A packed zero point runs along the rows; check its length now so load() cannot run off it.
  if (has_zp && zpe.info.dtype == "I32") {
    const Shape& zs = zpe.info.shape;
    if (zs.size() != 2 || zs[1] != g.sc)
      throw Error(where_entry(zpe) + "zero-point shape " + shape_str(zs) + " does not match " +
                  std::to_string(g.sc) + " scale columns");
    dense_packing(zs[0], g.sr, bits, zpe);
  } else if (has_zp) {
    expect_shape(zpe, m.scale->info.shape, "weight_zero_point");
  }
  auto load = [codes, scale, zpe, ge, has_zp, has_g, shape, rows, cols, bits, dense, g, sd] {
    const Tensor w = raw(codes), s = raw(scale);
    const int32_t* wp = w.ptr<int32_t>();
    const int64_t words = codes.info.shape.back();
    Tensor z, gi;
    bool zdense = dense;
    if (has_zp) {
      z = raw(zpe);
      if (z.dtype() == DType::I32) zdense = dense_packing(zpe.info.shape[0], g.sr, bits, zpe);
    }
    std::vector<int64_t> group(cols);
    for (int64_t j = 0; j < cols; ++j) group[j] = j / g.tw;
    if (has_g) {
      gi = raw(ge).to_f32();
      for (int64_t j = 0; j < cols; ++j) {
        const float v = gi.ptr<float>()[j];
        if (!(v >= 0 && v < static_cast<float>(g.sc)))
          throw Error(where_entry(ge) + "g_idx[" + std::to_string(j) +
                      "] = " + std::to_string(static_cast<int64_t>(v)) + " is outside the " +
                      std::to_string(g.sc) + " groups");
        group[j] = static_cast<int64_t>(v);
      }
    }
    Tensor out = Tensor::uninitialized(DType::F32, shape);
    float* o = out.mutable_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t si = (r / g.th) * g.sc + (g.sc == 1 ? 0 : group[j]);
        float q = static_cast<float>(code_at(wp + r * words, 1, j, bits, dense));
        if (has_zp) {
          const int64_t zr = r / g.th, zc = g.sc == 1 ? 0 : group[j];
          const float zv =
              z.dtype() == DType::I32
                  ? static_cast<float>(code_at(z.ptr<int32_t>() + zc, g.sc, zr, bits, zdense))
                  : static_cast<float>(z.ptr<int8_t>()[zr * g.sc + zc]);
          q = round_to(q - zv, sd);
        }
        o[r * cols + j] = round_to(q * scale_at(s, si), sd);
      }
    return out;
  };
  const std::string bs = std::to_string(bits);
  const std::string spec =
      a.symmetric ? "int" + bs + "_" + scale_spec(sd) + tile_suffix(a, g)
                  : "uint" + bs + "_" + scale_spec(sd) + "_int" + bs + tile_suffix(a, g);
  std::string fmt = "int" + bs + (a.symmetric ? " symmetric" : " asymmetric") + ", " +
                    scale_spec(sd) + " scale (" + a.strategy +
                    (a.group_size ? " of " + std::to_string(a.group_size) : std::string()) + ")" +
                    (has_g ? ", columns grouped by g_idx (activation order)" : "") +
                    (dense ? "" : ", packed 32/b values per word (before dense packing)");
  Entry e = logical_weight(wn, shape, sd, used, "compressed-tensors pack-quantized",
                           datatype_if_known(spec), fmt, load);
  parts.fold(static_cast<size_t>(m.codes - &parts.at(0)), std::move(e));
  drop_activation_parts(parts, m.prefix);
}

// weight I8 / F8_E4M3 [..., rows, cols] with a float scale (naive / int / float-quantized) or a
// U8 E8M0 one (mxfp8-quantized).
void fold_unpacked(const Source& src, Parts& parts, const Module& m, const Args& a, bool mx) {
  const std::string wn = m.prefix + ".weight";
  expect_dtype(*m.codes, {"F8_E4M3", "I8"}, "the quantized weight");
  const Shape shape = m.codes->info.shape;
  if (shape.size() < 2) throw Error(where_entry(*m.codes) + "a quantized weight needs 2 axes");
  const int64_t cols = shape.back(), rows = numel(shape) / std::max<int64_t>(cols, 1);
  Args aa = a;
  if (mx) {
    aa.strategy = "group";
    if (aa.group_size == 0) aa.group_size = 32;
    expect_dtype(*m.scale, {"U8"}, "the E8M0 weight_scale");
  } else {
    expect_dtype(*m.scale, {"BF16", "F16", "F32"}, "weight_scale");
  }
  const Grid g = grid_for(aa, rows, cols, *m.scale);
  std::vector<const Entry*> used = {m.codes, m.scale};
  const Entry* zp = nullptr;
  if (!a.symmetric) {
    zp = &parts.need(m.prefix + ".weight_zero_point", wn, src);
    expect_shape(*zp, m.scale->info.shape, "weight_zero_point");
    used.push_back(zp);
  }
  const std::string sd = mx ? "BF16" : m.scale->info.dtype;
  const Entry codes = *m.codes, scale = *m.scale, zpe = zp ? *zp : Entry{};
  const bool has_zp = zp != nullptr;
  auto load = [codes, scale, zpe, has_zp, shape, rows, cols, g, sd, mx] {
    const Tensor q = raw(codes).to_f32(), s = raw(scale);
    const Tensor z = has_zp ? raw(zpe).to_f32() : Tensor();
    Tensor out = Tensor::uninitialized(DType::F32, shape);
    float* o = out.mutable_ptr<float>();
    const float* qp = q.ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t si = (r / g.th) * g.sc + j / g.tw;
        const float f = mx ? e8m0(s.ptr<uint8_t>()[si]) : scale_at(s, si);
        float v = qp[r * cols + j];
        if (has_zp) v = round_to(v - z.ptr<float>()[si], sd);
        o[r * cols + j] = round_to(v * f, sd);
      }
    return out;
  };
  const bool fp8 = codes.info.dtype == "F8_E4M3";
  const std::string spec = mx    ? "e4m3fn_e8m0_t32"
                           : fp8 ? "e4m3fn_" + scale_spec(sd) + tile_suffix(aa, g)
                                 : "int8_" + scale_spec(sd) + tile_suffix(aa, g);
  const std::string conv =
      mx ? "compressed-tensors mxfp8-quantized"
         : "compressed-tensors " + (a.format.empty() ? std::string("naive-quantized") : a.format);
  const std::string fmt = std::string(fp8 ? "FP8 E4M3" : "int8") + " with a " +
                          (mx ? std::string("E8M0") : scale_spec(sd)) + " scale (" + aa.strategy +
                          ")" + (has_zp ? " and a zero point" : "");
  Entry e = logical_weight(wn, shape, sd, used, conv, datatype_if_known(spec), fmt, load);
  parts.fold(static_cast<size_t>(m.codes - &parts.at(0)), std::move(e));
  drop_activation_parts(parts, m.prefix);
}

// weight_packed U8 [..., rows, cols/2] FP4 pairs (low nibble first) with an F8_E4M3 scale per 16
// and a global scale (nvfp4), or a U8 E8M0 scale per 32 (mxfp4).
void fold_fp4(const Source& src, Parts& parts, const Module& m, bool nv) {
  const std::string wn = m.prefix + ".weight";
  expect_dtype(*m.codes, {"U8"}, "weight_packed");
  const Shape ps = m.codes->info.shape;
  if (ps.size() < 2) throw Error(where_entry(*m.codes) + "weight_packed needs 2 axes");
  Shape shape = ps;
  shape.back() *= 2;
  const int64_t cols = shape.back(), rows = numel(shape) / std::max<int64_t>(cols, 1);
  const int64_t gsz = nv ? 16 : 32;
  Args a;
  a.strategy = "group";
  a.group_size = gsz;
  const Grid g = grid_for(a, rows, cols, *m.scale);
  std::vector<const Entry*> used = {m.codes, m.scale};
  const Entry* gs = nullptr;
  if (nv) {
    expect_dtype(*m.scale, {"F8_E4M3"}, "the NVFP4 weight_scale");
    gs = &parts.need(m.prefix + ".weight_global_scale", wn, src);
    expect_dtype(*gs, {"F32"}, "weight_global_scale");
    if (numel(gs->info.shape) != 1)
      throw Error(where_entry(*gs) + "a global scale has shape " + shape_str(gs->info.shape));
    used.push_back(gs);
  } else {
    expect_dtype(*m.scale, {"U8"}, "the MXFP4 E8M0 weight_scale");
  }
  const Entry codes = *m.codes, scale = *m.scale, gse = gs ? *gs : Entry{};
  // PyTorch divides the bfloat16 scale by a 0-dim float32 global scale in bfloat16, by a [1]
  // one (what compressed-tensors writes) in float32.
  const std::string ratio = gs && gs->info.shape.empty() ? "BF16" : "F32";
  auto load = [codes, scale, gse, nv, shape, rows, cols, g, ratio] {
    const Tensor p = raw(codes), s = raw(scale);
    const float global = nv ? scale_at(raw(gse), 0) : 1.0f;
    const uint8_t* pp = p.ptr<uint8_t>();
    Tensor out = Tensor::uninitialized(DType::F32, shape);
    float* o = out.mutable_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t k = r * cols + j, si = r * g.sc + j / g.tw;
        const uint8_t b = pp[k / 2];
        const float q = e2m1((j & 1) ? b >> 4 : b & 15);
        // NVFP4: scale (bfloat16 of the E4M3 code, exact) / global in float32, then the float32
        // product rounded to bfloat16; MXFP4: 2^(e-127) in bfloat16 times the code.
        const float f = nv ? round_to(scale_at(s, si) / global, ratio) : e8m0(s.ptr<uint8_t>()[si]);
        o[k] = round_to(q * f, "BF16");
      }
    return out;
  };
  const std::string conv =
      nv ? "compressed-tensors nvfp4-pack-quantized" : "compressed-tensors mxfp4-pack-quantized";
  const std::string fmt = nv ? "NVFP4: E2M1 with an E4M3 scale per 16 and a float32 global "
                               "scale (448*6/amax, divided)"
                             : "MXFP4: E2M1 with an E8M0 scale per 32";
  Entry e = logical_weight(wn, shape, "BF16", used, conv,
                           datatype_if_known(nv ? "nvfp4" : "e2m1fnuz_e8m0_t32"), fmt, load);
  parts.fold(static_cast<size_t>(m.codes - &parts.at(0)), std::move(e));
  drop_activation_parts(parts, m.prefix);
}

}  // namespace

void fold_ctensors(const Source& src, Parts& parts) {
  const std::vector<Args> groups = read_groups(src);
  std::vector<Module> mods;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& e = parts.at(i);
    const std::string& n = e.info.name;
    if (ends_with(n, ".weight_packed")) {
      const std::string p = n.substr(0, n.size() - 14);
      mods.push_back({p, &e, &parts.need(p + ".weight_scale", p + ".weight", src)});
    } else if (ends_with(n, ".weight_scale")) {
      const std::string p = n.substr(0, n.size() - 13);
      if (parts.find(p + ".weight_packed")) continue;
      mods.push_back({p, &parts.need(p + ".weight", p + ".weight", src), &e});
    }
  }
  for (const Module& m : mods) {
    const std::string wn = m.prefix + ".weight";
    try {
      if (m.codes->info.name == wn) {
        const bool mx = m.scale->info.dtype == "U8";
        const std::string fmt = mx ? "mxfp8-quantized" : "float-quantized";
        fold_unpacked(src, parts, m, scheme_for(groups, m.prefix, fmt, src), mx);
      } else if (m.codes->info.dtype == "I32") {
        fold_packed_int(src, parts, m, scheme_for(groups, m.prefix, "pack-quantized", src));
      } else {
        // NVFP4 has an E4M3 group scale (and a global one), MXFP4 an E8M0 byte.
        const bool nv = m.scale->info.dtype == "F8_E4M3" ||
                        parts.find(m.prefix + ".weight_global_scale") != nullptr;
        fold_fp4(src, parts, m, nv);
      }
    } catch (const std::regex_error& e) {
      throw Error("'" + src.file + "': a config_groups target is not a valid regex (" + e.what() +
                  ")");
    }
  }
}

}  // namespace castscope::io::detail::quantized
