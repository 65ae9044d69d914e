// Models opened lazily, exports with progress and cancellation, and GEMM timings.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>

#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/matmul.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/planner.hpp"
#include "common.hpp"

namespace castscope::py {

using namespace nb::literals;

namespace {

nb::dict export_dict(const ExportReport& r) {
  nb::list tensors;
  for (const ExportedTensor& t : r.tensors) {
    nb::dict d;
    d["name"] = t.name;
    d["dtype"] = t.dtype;
    d["shape"] = t.shape;
    d["bytes_in"] = t.bytes_in;
    d["bytes_out"] = t.bytes_out;
    tensors.append(d);
  }
  nb::dict d;
  d["tensors"] = tensors;
  d["bytes_in"] = r.bytes_in;
  d["bytes_out"] = r.bytes_out;
  d["files"] = r.files;
  return d;
}

GemmKind parse_gemm_kind(const std::string& s) {
  for (GemmKind k :
       {GemmKind::BF16, GemmKind::FP8, GemmKind::FP8Block, GemmKind::TCFP12, GemmKind::TCFP16})
    if (s == to_string(k)) return k;
  throw Error("unknown GEMM kind '" + s + "' (bf16, fp8, fp8-block, tcfp12, tcfp16)");
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<ResolvedLayout>(
      m, "ResolvedLayout",
      "A tensor's quantization layout, resolved once from what its file says (docs/formats.md, "
      "\"Quantization axis\").")
      .def_ro("name", &ResolvedLayout::layout, "The convention, e.g. 'matmul B [K, N]'.")
      .def_prop_ro(
          "axis", [](const ResolvedLayout& l) { return l.axis.str(); },
          "The reduction axis as cast(axis=...) takes it: '-1', '0', '1:' or ':2'.")
      .def_ro("reason", &ResolvedLayout::reason, "What in the file decided it.")
      .def_ro("guessed", &ResolvedLayout::guessed, "Nothing in the file showed the layout.")
      .def_ro("conflict", &ResolvedLayout::conflict, "Its consumers disagree.")
      .def_ro("embedding", &ResolvedLayout::embedding, "A lookup table, kept by shortcuts.")
      .def("__repr__", [](const ResolvedLayout& l) {
        return "ResolvedLayout('" + l.layout + "', axis '" + l.axis.str() + "'" +
               (l.guessed ? ", guessed" : "") + (l.conflict ? ", conflict" : "") + ")";
      });

  nb::class_<io::StoredQuant>(m, "StoredQuant",
                              "How a quantized checkpoint stores a weight (codes + companions).")
      .def_ro("convention", &io::StoredQuant::convention,
              "fp8-block, compressed-tensors nvfp4-pack-quantized, gptq v1, ...")
      .def_ro("datatype", &io::StoredQuant::datatype,
              "The CastScope datatype it is stored as; '' when the grammar has none.")
      .def_ro("format", &io::StoredQuant::format, "The stored format in words.")
      .def_ro("parts", &io::StoredQuant::parts, "The file's tensors that make it up, codes first.")
      .def_ro("stored_bytes", &io::StoredQuant::stored_bytes, "Bytes of all parts in the file.")
      .def_ro("bits_per_weight", &io::StoredQuant::bits_per_weight, "8 * stored_bytes / values.")
      .def("__repr__", [](const io::StoredQuant& q) {
        return "StoredQuant('" + (q.datatype.empty() ? q.format : q.datatype) + "', " +
               q.convention + ", " + std::to_string(q.bits_per_weight) + " bits/weight)";
      });

  nb::class_<io::TensorInfo>(m, "TensorInfo", "A model tensor's entry, read from headers only.")
      .def_ro("layout", &io::TensorInfo::layout, "Its resolved quantization layout.")
      .def_prop_ro(
          "view", [](const io::TensorInfo& t) { return layout_view(t.shape, t.layout.axis); },
          "The 2-D view [outputs, reduction] its layout casts.")
      .def_ro("name", &io::TensorInfo::name)
      .def_ro("dtype", &io::TensorInfo::dtype, "Stored dtype: BF16, F8_E4M3, Q4_0, float32, ...")
      .def_ro("shape", &io::TensorInfo::shape)
      .def_ro("nbytes", &io::TensorInfo::nbytes)
      .def_ro("file", &io::TensorInfo::file)
      .def_prop_ro(
          "stored",
          [](const io::TensorInfo& t) -> std::optional<io::StoredQuant> {
            if (t.stored.empty()) return std::nullopt;
            return t.stored;
          },
          "How a quantized checkpoint stores it (None for a plain tensor); load() gives its "
          "dequantized values.")
      .def("__repr__", [](const io::TensorInfo& t) {
        return "TensorInfo('" + t.name + "', " + t.dtype + ", " + shape_str(t.shape) + ")";
      });

  nb::class_<io::Model>(m, "_Model")
      .def_prop_ro("path", &io::Model::path)
      .def_prop_ro("format", &io::Model::format)
      .def_prop_ro("tensors", &io::Model::tensors)
      .def(
          "_load",
          [](const io::Model& model, const std::string& name, bool raw, const std::string& fw) {
            if (!model.find(name))
              throw Error("'" + model.path() + "' has no tensor '" + name + "'");
            JobControl job;
            const Tensor t = run_job(job, nb::none(),
                                     [&] { return raw ? model.load_raw(name) : model.load(name); });
            return to_python(t, fw == "torch" ? Framework::Torch : Framework::Numpy);
          },
          "name"_a, "raw"_a, "framework"_a);

  m.def(
      "_open_model",
      [](const std::string& path) {
        JobControl job;
        std::shared_ptr<io::Model> model = run_job(
            job, nb::none(), [&] { return std::shared_ptr<io::Model>(io::open_model(path)); });
        return model;
      },
      "path"_a);

  m.def(
      "_export",
      [](const io::Model& model, const std::string& out, const std::string& plan_kind,
         const std::string& plan, const std::string& layout, const std::string& round,
         const std::string& scale_mode, uint64_t seed, const std::string& axis,
         const std::string& device, const std::string& config_path,
         const std::map<std::string, std::string>& metadata, nb::handle progress) {
        ExportPlan p;
        if (plan_kind == "json")
          p = parse_plan(plan, "<plan>");
        else if (plan_kind == "file")
          p = load_plan(plan);
        else
          p = plan_for_dtype(plan);
        ExportOptions o;
        o.layout = parse_layout(layout);
        o.cast = parse_cast_options(
            {.round = round, .scale_mode = scale_mode, .axis = axis, .device = device}, o.cast, "");
        o.cast.seed = seed;
        o.config_path = config_path;
        // As castscope-cli export records it, so both write the same file.
        o.metadata["castscope.plan"] = plan_to_json(p);
        for (const auto& [k, v] : metadata) o.metadata[k] = v;
        JobControl job;
        const ExportReport r =
            run_job(job, progress, [&] { return export_model(model, out, p, o, &job); });
        return export_dict(r);
      },
      "model"_a, "out"_a, "plan_kind"_a, "plan"_a, "layout"_a, "round"_a, "scale_mode"_a, "seed"_a,
      "axis"_a, "device"_a, "config_path"_a, "metadata"_a, "progress"_a.none());

  // Which datatype and axis the plan gives each tensor, resolved exactly as export_model does
  // (ExportPlan::dtype_for and the exporters' cast_options), so that evaluation casts every
  // weight the way an export of the same plan would.
  m.def(
      "_plan_layout",
      [](const io::Model& model, const std::string& plan_kind, const std::string& plan,
         const std::string& axis, const std::string& layout) {
        const ExportPlan p = plan_kind == "json"   ? parse_plan(plan, "<plan>")
                             : plan_kind == "file" ? load_plan(plan)
                                                   : plan_for_dtype(plan);
        ExportOptions o;
        o.layout = parse_layout(layout);
        o.cast = parse_cast_options({.axis = axis}, o.cast, "");
        nb::list out;
        for (const io::TensorInfo& info : model.tensors()) {
          const std::optional<DataType> d = p.dtype_for(info);
          nb::dict e;
          e["name"] = info.name;
          e["shape"] = info.shape;
          e["stored"] = info.dtype;
          e["rule"] = p.match(info.name, static_cast<int>(info.shape.size()));
          if (d) {
            const CastOptions c =
                exportdetail::cast_options(o, CastMode::Virtual, nullptr, p, info);
            e["dtype"] = d->str();
            e["dtype_label"] = d->label();
            e["axis"] = AxisSpec::from(c).str();
            e["axis_desc"] = describe_axis(c, info.shape);
            e["bits_per_value"] = d->bits_per_value(axis_length(c, info.shape));
            // Exact, partial blocks counted whole (a K-quant row of 120 stores a 256-block).
            e["storage_bits"] = storage_bits(*d, info.shape, c);
            const Rotation rot = p.rotation_for(info);
            e["rotate"] = rot.enabled() ? rot.str() : std::string();
            // The rule's method with its options, as export runs it.
            const MethodOptions m = p.method_for(info);
            e["method"] = to_string(m.method);
            nb::dict mo;
            mo["damp"] = m.damp;
            mo["block"] = m.block;
            mo["act_order"] = m.act_order;
            mo["static_groups"] = m.static_groups;
            mo["four_over_six"] = m.four_over_six;
            e["method_options"] = mo;
          } else {
            e["dtype"] = nb::none();
          }
          out.append(e);
        }
        return out;
      },
      "model"_a, "plan_kind"_a, "plan"_a, "axis"_a, "layout"_a);

  m.def(
      "_map",
      [](const io::Model& model, const std::vector<std::string>& dtypes, const std::string& round,
         const std::string& scale_mode, const std::string& axis, const std::string& device,
         const std::string& filter, bool include_1d, bool include_embeddings, nb::handle progress) {
        MapOptions o;
        o.dtypes = dtypes;
        o.cast = parse_cast_options(
            {.round = round, .scale_mode = scale_mode, .axis = axis, .device = device}, o.cast, "");
        o.filter = filter;
        o.include_1d = include_1d;
        o.include_embeddings = include_embeddings;
        JobControl job;
        // The sweep `castscope-cli map` runs: every cell is the CLI's figure.
        const ModelMap map = run_job(job, progress, [&] { return sweep_model(model, o, &job); });
        nb::list rows;
        for (const MapRow& r : map.rows) {
          nb::list cells;
          for (const MapCell& c : r.cells) {
            nb::dict d;
            if (c.storage_bits) {
              d["storage_bits"] = c.storage_bits;
              d["bits_per_value"] = c.bits_per_value(r.numel);
            }
            if (!c.error.empty()) {
              d["error"] = c.error;
            } else {
              d["snr_db"] = c.stats.snr_db;
              d["mse"] = c.stats.mse;
              d["max_abs_err"] = c.stats.max_abs_err;
              d["clipped_pct"] = c.stats.clipped_pct();
            }
            cells.append(d);
          }
          nb::dict d;
          d["name"] = r.name;
          d["shape"] = r.shape;
          d["axis"] = r.axis;
          d["layout"] = r.layout.layout;
          d["layout_guessed"] = r.layout.guessed;
          d["cells"] = cells;
          rows.append(d);
        }
        nb::dict d;
        d["columns"] = map.columns;
        d["rows"] = rows;
        d["backend"] = map.backend;
        d["seconds"] = map.seconds;
        return d;
      },
      "model"_a, "dtypes"_a, "round"_a, "scale_mode"_a, "axis"_a, "device"_a, "filter"_a,
      "include_1d"_a, "include_embeddings"_a, "progress"_a.none());

  m.def(
      "gemm_available",
      [] {
        std::string reason;
        const bool ok = gemm_available(&reason);
        return std::make_pair(ok, reason);
      },
      "(available, reason): whether GEMMs can run here.");
  m.def(
      "_gemm",
      [](const std::string& kind, int mm, int n, int k, uint64_t seed, int warmup, int iters,
         bool check) {
        GemmOptions o;
        o.m = mm;
        o.n = n;
        o.k = k;
        o.seed = seed;
        o.warmup = warmup;
        o.iters = iters;
        o.check = check;
        const GemmKind gk = parse_gemm_kind(kind);
        JobControl job;
        const GemmResult r = run_job(job, nb::none(), [&] { return run_gemm(gk, o, &job); });
        nb::dict d;
        d["kind"] = to_string(r.kind);
        d["m"] = r.m;
        d["n"] = r.n;
        d["k"] = r.k;
        d["ms"] = r.ms;
        d["tflops"] = r.tflops;
        d["rel_error"] = r.rel_error;
        d["note"] = r.note;
        return d;
      },
      "kind"_a, "m"_a, "n"_a, "k"_a, "seed"_a, "warmup"_a, "iters"_a, "check"_a);
}

}  // namespace castscope::py
