// What each export layout holds along a tensor's axis (export.hpp, layout_refusal): the facts the
// layouts' exporters refuse by, asked before a plan is made so the planner chooses within them.
#include "castscope/export.hpp"
#include "castscope/storage_bits.hpp"
#include "families/ggml/ggml_types.hpp"

namespace castscope {
namespace {

bool is_one_of(const DataType& d, std::initializer_list<const char*> names) {
  const std::string s = d.str();
  for (const char* n : names)
    if (s == DataType::parse(n).str()) return true;
  return false;
}

// "" or why: the axis as the layout's exporter takes it for this tensor, then the layout's rules.
std::string refusal(Layout layout, const DataType& d, const io::TensorInfo& info,
                    const ExportPlan& plan, const CastOptions& cast) {
  ExportOptions eo;
  eo.layout = layout;
  eo.cast = cast;
  CastOptions co;
  try {
    co = resolve_axis(exportdetail::cast_options(eo, CastMode::Actual, nullptr, plan, info),
                      info.shape);
    (void)storage_bits(d, info.shape, co);  // the datatype's tiles fit the tensor at all
  } catch (const Error& e) {
    return e.what();
  }
  const Shape& s = info.shape;
  const int64_t last = s.empty() ? 0 : s.back();
  const bool along_last = !s.empty() && exportdetail::axis_is_last(co, s);
  const std::string on = "shape " + shape_str(s) + " cast along axis " + describe_axis(co, s);
  const bool ggml = family_traits(d.family()).gguf_blocks;
  const int64_t block = ggml ? ggml::type_info(d.ggml_type())->block : 32;
  switch (layout) {
    case Layout::Native:
      // A trailing flattened axis is the row of the view ggml quantizes; leading ones are not.
      if (ggml && (co.flatten ? co.lead : !along_last))
        return d.str() + " quantizes blocks along the last axis (ggml's rows); " + on;
      return "";
    case Layout::GGUF:
      if (!ggml && !is_one_of(d, {"float16", "bfloat16", "float32", "int8_float16_t32"}) &&
          !exportdetail::is_mxfp4(d))
        return "the gguf layout holds float16, bfloat16, float32, Q8_0, MXFP4 and ggml's block "
               "formats, not " +
               d.str();
      if (ggml || !is_one_of(d, {"float16", "bfloat16", "float32"}))
        if (!along_last || last % block != 0)
          return d.str() + " needs " + std::to_string(block) +
                 "-element blocks along the last axis in GGUF; " + on;
      return "";
    case Layout::CompressedTensors: {
      const std::string f = exportdetail::ctensors_format(d);
      if (f.empty())
        return "the compressed-tensors layout holds FP8, nvfp4, mxfp4e2, MXFP8 and MXFP6, not " +
               d.str();
      if (co.flatten)
        return "compressed-tensors quantizes Linear and Embedding weights only; " + on +
               " (a conv weight)";
      if (!along_last) return "compressed-tensors scales run along the last axis; " + on;
      const int64_t g = f.rfind("nvfp4", 0) == 0 ? 16 : f.rfind("float", 0) == 0 ? 1 : 32;
      if (last % g != 0)
        return f + " needs the last axis to be a multiple of " + std::to_string(g) + "; " + on;
      if (f.rfind("mxfp6", 0) == 0 && s.size() != 2) return f + " needs a 2-D weight; " + on;
      return "";
    }
    case Layout::GptOss: {
      if (!exportdetail::is_mxfp4(d))
        return "the gpt-oss layout stores MXFP4 (mxfp4e2) only, not " + d.str();
      const int r = static_cast<int>(s.size());
      const int ax = r ? (co.axis < 0 ? co.axis + r : co.axis) : 0;
      const bool ok_axis = r >= 1 && !co.flatten && (ax == r - 1 || (r >= 2 && ax == r - 2));
      if (!ok_axis || s[static_cast<size_t>(ax)] % 32 != 0)
        return "gpt-oss MXFP4 needs 32-element blocks along the last axis (or axis -2 of "
               "experts); " +
               on;
      return "";
    }
  }
  return "";
}

}  // namespace

std::string layout_refusal(Layout layout, const DataType& d, const io::TensorInfo& info,
                           const CastOptions& cast) {
  ExportPlan casts;  // a plan that casts this tensor to d, as the one being made would
  casts.default_dtype = d;
  casts.default_text = d.str();
  return refusal(layout, d, info, casts, cast);
}

PlanFit plan_fit(const io::Model& model, const ExportPlan& plan, const CastOptions& cast) {
  PlanFit fit;
  for (Layout l : {Layout::Native, Layout::GGUF, Layout::CompressedTensors, Layout::GptOss}) {
    std::vector<std::pair<std::string, std::string>> why;
    for (const io::TensorInfo& t : model.tensors()) {
      const std::optional<DataType> d = plan.dtype_for(t);
      if (!d) continue;
      std::string r = refusal(l, *d, t, plan, cast);
      if (!r.empty()) why.emplace_back(t.name, std::move(r));
    }
    if (why.empty())
      fit.holds.push_back(l);
    else
      fit.refused.emplace_back(l, std::move(why));
  }
  return fit;
}

}  // namespace castscope
