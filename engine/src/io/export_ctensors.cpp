// compressed-tensors checkpoints (the format of llm-compressor, loaded by vLLM): float-quantized
// FP8, nvfp4-pack-quantized, mxfp4-pack-quantized, mxfp8-quantized and mxfp6-pack-quantized
// weights, plus the quantization_config that the library reads from config.json.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "castscope/export.hpp"
#include "castscope/fused.hpp"
#include "castscope/method.hpp"

namespace castscope {
namespace exportdetail {
namespace {

using nlohmann::json;

enum class CtKind { FP8, NVFP4, MXFP4, MXFP8, MXFP6 };

struct CtScheme {
  CtKind kind;
  std::string format;  // compressed-tensors CompressionFormat value
  json weights;        // QuantizationArgs
};

bool is_e2m1(const NumberSpec& n) {
  return n.is_float() && n.ebits() == 2 && n.mbits() == 1 && n.bias() == 1;
}

bool is_e2m3(const NumberSpec& n) {
  return n.is_float() && n.ebits() == 2 && n.mbits() == 3 && n.bias() == 1;
}

// One e8m0 scale per 32 values along the axis, nothing else: the MX block shape.
bool is_mx_block(const ScaleSpec& s) {
  return s.scale.is_exponent() && s.scale.bits() == 8 && !s.second && s.tiles.size() == 1 &&
         s.tiles[0].size == 32;
}

std::optional<CtScheme> scheme_of(const DataType& d) {
  if (!family_traits(d.family()).grammar || !d.scaled()) return std::nullopt;
  const ScaleSpec& s = *d.scale();
  for (const TileSpec& t : s.tiles)
    if (t.sub || t.sparse()) return std::nullopt;
  json w = {{"num_bits", 8},
            {"type", "float"},
            {"symmetric", true},
            {"dynamic", false},
            {"actorder", nullptr},
            {"observer", "minmax"},
            {"observer_kwargs", json::object()},
            {"group_size", nullptr},
            {"block_structure", nullptr}};
  if ((d.number().name() == "e4m3fn" || is_e2m3(d.number())) && is_mx_block(s)) {
    // MXFP8 / MXFP6: the scale stored as its e8m0 byte (2^(code - 127)), as compressed-tensors'
    // mx_utils reads it.
    const bool fp8 = d.number().name() == "e4m3fn";
    w["num_bits"] = fp8 ? 8 : 6;
    w["strategy"] = "group";
    w["group_size"] = 32;
    w["scale_dtype"] = "torch.uint8";
    return fp8 ? CtScheme{CtKind::MXFP8, "mxfp8-quantized", w}
               : CtScheme{CtKind::MXFP6, "mxfp6-pack-quantized", w};
  }
  if (d.number().name() == "e4m3fn" && s.scale.name() == "float32" && !s.second) {
    if (s.tiles.empty())
      w["strategy"] = "tensor";
    else if (s.tiles.size() == 1 && s.tiles[0].channel())
      w["strategy"] = "channel";
    else if (s.tiles.size() == 1) {
      w["strategy"] = "group";
      w["group_size"] = s.tiles[0].size;
    } else if (s.tiles.size() == 2 && !s.tiles[0].channel() && !s.tiles[1].channel()) {
      w["strategy"] = "block";
      w["block_structure"] = {s.tiles[0].size, s.tiles[1].size};
    } else {
      return std::nullopt;
    }
    return CtScheme{CtKind::FP8, "float-quantized", w};
  }
  if (!is_e2m1(d.number()) || s.tiles.size() != 1) return std::nullopt;
  w["num_bits"] = 4;
  if (s.scale.name() == "e4m3fn" && s.second && s.second->name() == "float32" &&
      s.tiles[0].size == 16) {
    w["strategy"] = "tensor_group";
    w["group_size"] = 16;
    w["scale_dtype"] = "torch.float8_e4m3fn";
    return CtScheme{CtKind::NVFP4, "nvfp4-pack-quantized", w};
  }
  if (is_mxfp4(d)) {
    w["strategy"] = "group";
    w["group_size"] = 32;
    w["scale_dtype"] = "torch.uint8";
    return CtScheme{CtKind::MXFP4, "mxfp4-pack-quantized", w};
  }
  return std::nullopt;
}

// Four 6-bit codes in three bytes, little-endian: code k of a group of four at bits 6k (the
// packing of compressed-tensors' mxfp6 helpers). e2m3fnuz never yields 0x20 (its NaN, which
// scaled casts put in the scale), so every field is an OCP E2M3 code of the same value.
Tensor pack_e2m3(const Tensor& codes) {
  const Shape& s = codes.shape();
  if (s.back() % 4) throw Error("mxfp6-pack-quantized needs the last axis to be a multiple of 4");
  Shape o = s;
  o.back() = s.back() / 4 * 3;
  Tensor out = Tensor::empty(DType::U8, o);
  const uint8_t* in = codes.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  const int64_t words = codes.numel() / 4;
  for (int64_t i = 0; i < words; ++i) {
    uint32_t word = 0;
    for (int k = 0; k < 4; ++k) word |= static_cast<uint32_t>(in[4 * i + k] & 0x3F) << (6 * k);
    for (int k = 0; k < 3; ++k) dst[3 * i + k] = static_cast<uint8_t>(word >> (8 * k));
  }
  return out;
}

// The method in the weights' QuantizationArgs as llm-compressor records it: GPTQ's column order
// in "actorder" ("static": by Hessian diagonal with static groups; GPTQModifier names itself
// only in its recipe), the MSE scale search as the "mse" observer with its grid.
// llm-compressor's "fouroversix" observer is another search (an alias of nvfp4_expanded_mse),
// so four over six keeps "minmax" here and is named in __metadata__ only.
void name_method(json& w, const MethodOptions& m) {
  if (m.method == Method::GPTQ) w["actorder"] = m.act_order ? json("static") : json(nullptr);
  if (m.method == Method::MSE && !m.four_over_six) {
    w["observer"] = "mse";
    w["observer_kwargs"] = {{"maxshrink", m.maxshrink}, {"grid", m.grid}, {"norm", m.norm}};
  }
}

std::string hex_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", u);
  return b;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

std::string ctensors_format(const DataType& d) {
  const std::optional<CtScheme> sc = scheme_of(d);
  return sc ? sc->format : std::string();
}

ExportReport export_compressed_tensors(const io::Model& model, const std::string& out,
                                       const ExportPlan& plan, const ExportOptions& opt,
                                       JobControl* job) {
  ExportReport rep;
  const std::string config_path =
      opt.config_path.empty() ? dir_of(out) + "/config.json" : opt.config_path;
  // Read an existing config.json first so that a malformed one fails before any work is done.
  json config = json::object();
  {
    std::ifstream f(config_path, std::ios::binary);
    if (f) {
      std::ostringstream ss;
      ss << f.rdbuf();
      try {
        config = json::parse(ss.str());
      } catch (const json::exception& e) {
        throw Error("'" + config_path + "': existing config.json is not valid JSON (" + e.what() +
                    ")");
      }
      if (!config.is_object())
        throw Error("'" + config_path + "': existing config.json is not a JSON object");
    }
  }
  OutputFiles w(out, opt);
  std::map<std::string, std::string> meta = opt.metadata;
  meta["format"] = "pt";
  meta["castscope.layout"] = "compressed-tensors";
  // Scheme (format + weights args) -> module names, in first-seen order.
  std::vector<std::pair<CtScheme, std::set<std::string>>> groups;
  // vLLM fuses q / k / v and gate / up into one weight with one NVFP4 global scale: as
  // llm-compressor's update_fused_layer_weight_global_scales, the minimum of the members' global
  // scales (the largest tensor scale t), every member's block scales chosen under it.
  std::map<std::string, std::vector<const io::TensorInfo*>> fused;
  for (const io::TensorInfo& info : model.tensors()) {
    const std::string g = fused_group_of(info.name);
    if (g.empty()) continue;
    const std::optional<DataType> d = plan.dtype_for(info);
    const std::optional<CtScheme> sc = d ? scheme_of(*d) : std::nullopt;
    if (sc && sc->kind == CtKind::NVFP4 && plan.method_for(info).method == Method::RTN)
      fused[g].push_back(&info);
  }
  std::map<std::string, float> fused_scale;
  const auto shared_tensor_scale = [&](const std::string& g, JobControl* sub) {
    auto it = fused_scale.find(g);
    if (it != fused_scale.end()) return it->second;
    float t = 0;
    for (const io::TensorInfo* m : fused[g])
      with_tensor_context(model, m->name, [&] {
        const CastOptions co = cast_options(opt, CastMode::Actual, sub, plan, *m);
        const CastResult r = cast(model.load(m->name), *plan.dtype_for(*m), co);
        t = std::max(t, r.tenscale.ptr<float>()[0]);
      });
    return fused_scale[g] = t;
  };
  for_each_routed(
      model, plan, job, w, rep,
      [&](const io::TensorInfo& info, const DataType& d, const Tensor& x, JobControl* sub,
          ExportedTensor& et) {
        std::optional<CtScheme> sc = scheme_of(d);
        if (!sc)
          throw Error(
              "the compressed-tensors layout holds FP8 (e4m3fn_float32 per tensor / channel / "
              "group / block), nvfp4, mxfp4e2, MXFP8 (e4m3fn_e8m0_t32) and MXFP6 "
              "(e2m3[fnuz]_e8m0_t32); the plan maps it to " +
              d.str());
        const CastOptions co = cast_options(opt, CastMode::Actual, sub, plan, info);
        if (x.rank() >= 1 && co.flatten)
          // compressed-tensors quantizes the weights of Linear and Embedding modules only (its
          // initialize_module_for_quantization refuses any other module), so a conv weight
          // quantized over I*kh*kw would not load anywhere.
          throw Error("compressed-tensors quantizes Linear and Embedding weights only; shape " +
                      shape_str(x.shape()) + " is cast over the flattened axes " +
                      describe_axis(co, x.shape()) +
                      " (a conv weight): keep it, or export it with --layout native");
        if (x.rank() < 1 || !axis_is_last(co, x.shape()))
          throw Error("compressed-tensors scales run along the last axis; cast axis " +
                      describe_axis(co, x.shape()) + " does not fit shape " + shape_str(x.shape()));
        const bool dot_weight =
            info.name.size() > 7 && info.name.compare(info.name.size() - 7, 7, ".weight") == 0;
        const std::string module =
            dot_weight ? info.name.substr(0, info.name.size() - 7) : info.name;
        const std::string base = dot_weight ? info.name : info.name + ".weight";
        const MethodOptions m = plan.method_for(info);
        name_method(sc->weights, m);
        CastResult r = method_cast(info, d, x, co, plan, opt);
        const std::string fused_group = fused_group_of(info.name);
        const bool shares =
            sc->kind == CtKind::NVFP4 && fused.count(fused_group) && fused[fused_group].size() > 1;
        if (shares) {
          const float t = shared_tensor_scale(fused_group, sub);
          if (t != r.tenscale.ptr<float>()[0]) r = cast_with_tensor_scale(x, r, t);
          meta["castscope." + info.name + ".fused"] = fused_group;
        }
        std::vector<std::pair<std::string, Tensor>> parts;
        if (sc->kind == CtKind::MXFP8 && x.shape().back() % 32 != 0)
          throw Error(sc->format + " needs the last axis to be a multiple of 32 (shape " +
                      shape_str(x.shape()) + ")");
        if (sc->kind == CtKind::FP8 || sc->kind == CtKind::MXFP8) {
          parts = {{base, r.codes}, {base + "_scale", r.scale}};
        } else if (sc->kind == CtKind::MXFP6) {
          // The library unpacks with the packed tensor's [rows, cols] and groups of 32.
          if (x.rank() != 2 || x.shape().back() % 32 != 0)
            throw Error(sc->format +
                        " needs a 2-D weight whose last axis is a multiple of 32 (shape " +
                        shape_str(x.shape()) + ")");
          parts = {{base + "_packed", pack_e2m3(r.codes)}, {base + "_scale", r.scale}};
        } else {
          const int64_t g = sc->kind == CtKind::NVFP4 ? 16 : 32;
          if (x.shape().back() % g != 0)
            throw Error(sc->format + " needs the last axis to be a multiple of " +
                        std::to_string(g) + " (shape " + shape_str(x.shape()) + ")");
          parts = {{base + "_packed", pack_e2m1(r.codes, d.number().infnan() == InfNan::FNUZ)},
                   {base + "_scale", r.scale}};
          if (sc->kind == CtKind::NVFP4) {
            // compressed-tensors divides by a global scale (448 * 6 / amax): the reciprocal of
            // CastScope's tensor scale t. t itself goes into __metadata__ for exact decoding.
            const float t = r.tenscale.ptr<float>()[0];
            Tensor gs = Tensor::empty(DType::F32, {1});
            gs.mutable_ptr<float>()[0] = 1.0f / t;
            parts.push_back({base + "_global_scale", gs});
            meta["castscope." + info.name + ".tensor_scale"] = hex_f32(t);
          }
        }
        for (const auto& [k, t] : parts) {
          w.add(k, t);
          et.bytes_out += t.nbytes();
        }
        meta["castscope." + info.name + ".dtype"] = d.str();
        if (m.method != Method::RTN) meta["castscope." + info.name + ".method"] = method_spec(m);
        et.dtype = d.str();
        et.axis = describe_axis(co, x.shape());
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& gp) {
          return gp.first.format == sc->format && gp.first.weights == sc->weights;
        });
        if (it == groups.end())
          groups.push_back({*sc, {module}});
        else
          it->second.insert(module);
      });
  json qc = json::object();
  qc["quant_method"] = "compressed-tensors";
  qc["quantization_status"] = "compressed";
  std::set<std::string> formats;
  json cg = json::object();
  for (size_t i = 0; i < groups.size(); ++i) {
    formats.insert(groups[i].first.format);
    cg["group_" + std::to_string(i)] = {{"targets", json(groups[i].second)},
                                        {"weights", groups[i].first.weights},
                                        {"input_activations", nullptr},
                                        {"output_activations", nullptr},
                                        {"format", groups[i].first.format}};
  }
  qc["config_groups"] = cg;
  qc["format"] =
      formats.size() == 1 ? *formats.begin() : (formats.empty() ? "dense" : "mixed-precision");
  qc["ignore"] = json::array();
  qc["kv_cache_scheme"] = nullptr;
  qc["sparsity_config"] = json::object();
  qc["global_compression_ratio"] = nullptr;
  config["quantization_config"] = qc;
  const std::string text = config.dump(2) + "\n";
  if (job) job->check();
  w.finish(meta, job, rep);
  commit_verified(
      config_path, [&](const auto& put) { put(text.data(), text.size()); },
      [&](const std::string& staged) {
        std::ifstream f(staged, std::ios::binary);
        std::ostringstream ss;
        ss << f.rdbuf();
        if (ss.str() != text)
          throw Error("verifying '" + config_path + "': content read back differs");
      });
  rep.files.push_back(config_path);
  return rep;
}

}  // namespace exportdetail
}  // namespace castscope
