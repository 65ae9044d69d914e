// castscope._core: the engine's datatypes, casts and statistics for Python. The public API, with
// its argument handling for numpy and PyTorch, lives in castscope/__init__.py.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "castscope/datatype.hpp"
#include "castscope/device.hpp"
#include "castscope/executor.hpp"
#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "castscope/metrics.hpp"
#include "castscope/storage_bits.hpp"
#include "common.hpp"

namespace castscope::py {

void bind_model(nb::module_& m);    // model.cpp
void bind_planner(nb::module_& m);  // planner.cpp

namespace {

using namespace nb::literals;

const char* family_name(Family f) {
  return family_traits(f).name;
}

// A cast's outputs where they were computed (the executor's PlacedResult), and the framework
// and device its tensors go back to.
struct PyCastResult {
  exec::PlacedResult r;
  Framework fw = Framework::Numpy;
  int device_id = 0;

  const DataType& dtype() const { return r.dtype(); }
  CastMode mode() const { return r.mode(); }
  const Shape& shape() const { return r.shape(); }
  const CastCounts& counts() const { return r.counts(); }
  nb::object part(exec::Part p) const { return to_python(r.part(p), fw, device_id); }
  CastResult on_host() const { return r.to_host(); }
};

PyCastResult do_cast(nb::ndarray<nb::ro, nb::c_contig> x, const DataType& dtype,
                     const std::string& round, const std::string& scale_mode,
                     const std::string& overflow, uint64_t seed, const std::string& axis,
                     const std::string& mode, const std::string& device, bool tcfp_absmax,
                     int threads, const std::string& as_dtype, const std::string& framework) {
  CastOptions o =
      parse_cast_options({mode, round, scale_mode, overflow, axis, /*rotate=*/"", device}, {}, "");
  o.seed = seed;
  o.tcfp_nf_aware = !tcfp_absmax;
  o.threads = threads;
  const Input in = read_input(std::move(x), as_dtype, "the input tensor");
  PyCastResult r;
  r.fw = framework == "torch" ? Framework::Torch : Framework::Numpy;
  r.device_id = in.device_id;
  JobControl job;
  o.job = &job;
  // A tensor on the device is cast where it lives; a host tensor goes where the executor places
  // it (cast()).
  if (in.cuda) {
    if (o.device == Device::CPU)  // before the borrow, which a build without CUDA refuses
      throw Error("device='cpu' was asked for a CUDA tensor; move it to the host first");
    const exec::PlacedTensor dx = device_tensor(in);
    r.r = run_job(job, nb::none(), [&] { return exec::current().cast_resident(dx, dtype, o); });
  } else {
    const Tensor hx = host_tensor(in);
    r.r = exec::PlacedResult(run_job(job, nb::none(), [&] { return cast(hx, dtype, o); }));
  }
  return r;
}

// castscope.quantize: a method's cast (host tensors; the methods run on the CPU). Returns the
// actual-mode result, awq's pre-quant scale (None for the others) and the layer output error on
// the calibration inputs (0 without).
nb::tuple do_quantize(nb::ndarray<nb::ro, nb::c_contig> x, const DataType& dtype,
                      const std::string& method, nb::object calib, const std::string& axis,
                      double damp, int block, bool act_order, bool static_groups,
                      bool four_over_six, const std::string& name, const std::string& as_dtype,
                      const std::string& framework) {
  CastOptions o = parse_cast_options({"actual", "", "", "", axis, "", "cpu"}, {}, "");
  MethodOptions m;
  m.method = parse_method(method);
  m.damp = damp;
  m.block = block;
  m.act_order = act_order;
  m.static_groups = static_groups;
  m.four_over_six = four_over_six;
  const Input in = read_input(std::move(x), as_dtype, "the weight");
  if (in.cuda) throw Error("quantize runs on the CPU; move the weight to the host first");
  Calibration c;
  if (!calib.is_none()) {
    const Input ci = read_input(nb::cast<nb::ndarray<nb::ro, nb::c_contig>>(calib), "",
                                "the calibration inputs");
    if (ci.cuda) throw Error("calibration inputs must be on the host");
    c.inputs = host_tensor(ci).clone();
  }
  const Tensor hx = host_tensor(in);
  JobControl job;
  MethodResult r = run_job(job, nb::none(), [&] { return quantize(hx, dtype, o, m, c, name); });
  PyCastResult pr;
  pr.fw = framework == "torch" ? Framework::Torch : Framework::Numpy;
  pr.r = exec::PlacedResult(std::move(r.cast));
  nb::object s = r.pre_quant_scale ? to_python(r.pre_quant_scale, pr.fw) : nb::none();
  return nb::make_tuple(pr, s, r.output_error);
}

nb::dict stats_dict(const Stats& s) {
  nb::dict d;
  d["count"] = s.count;
  d["nonfinite_in"] = s.nonfinite_in;
  d["nonfinite_out"] = s.nonfinite_out;
  d["clipped"] = s.clipped;
  d["clipped_pct"] = s.clipped_pct();
  d["zeros_out"] = s.zeros_out;
  d["mse"] = s.mse;
  d["snr_db"] = s.snr_db;
  d["exact"] = std::isinf(s.snr_db) && s.snr_db > 0;
  d["max_abs_err"] = s.max_abs_err;
  d["mean_err"] = s.mean_err;
  d["signal_power"] = s.signal_power;
  return d;
}

nb::dict do_metrics(nb::ndarray<nb::ro, nb::c_contig> x, nb::ndarray<nb::ro, nb::c_contig> y,
                    const std::string& x_as, int64_t clipped) {
  const Input a = read_input(std::move(x), x_as, "x");
  const Input b = read_input(std::move(y), "", "y");
  if (a.shape != b.shape)
    throw Error("metrics: x has shape " + shape_str(a.shape) + ", y has shape " +
                shape_str(b.shape));
  if (b.dtype != DType::F32) throw Error("metrics: y must be float32");
  if (a.cuda != b.cuda) throw Error("metrics: x and y must be on the same device");
  Stats s;
  JobControl job;
  const exec::PlacedTensor pa = a.cuda ? device_tensor(a) : exec::PlacedTensor(host_tensor(a));
  const exec::PlacedTensor pb = b.cuda ? device_tensor(b) : exec::PlacedTensor(host_tensor(b));
  s = run_job(job, nb::none(), [&] { return exec::compute_stats(pa, pb, clipped); });
  return stats_dict(s);
}

nb::list tiles_of(const DataType& d) {
  nb::list out;
  if (!d.scale()) return out;
  for (const TileSpec& t : d.scale()->tiles) {
    nb::dict e;
    e["size"] = t.size;
    e["sub"] = t.sub;
    e["n"] = t.n;
    e["m"] = t.m;
    out.append(e);
  }
  return out;
}

const RegistryEntry* entry_of(const DataType& d) {
  return d.name().empty() ? nullptr : find_registry(d.name());
}

void bind_datatype(nb::module_& m) {
  nb::class_<DataType>(m, "DataType",
                       "A datatype: a registry name (``mxfp4e2``, ``nvfp4``, ``tcfp12``) or a "
                       "string of the grammar ``NSPEC[_SSPEC]`` (``e2m1fnuz_e8m0_t32``).")
      .def(
          "__init__",
          [](DataType* t, const std::string& s) { new (t) DataType(DataType::parse(s)); }, "spec"_a)
      .def_prop_ro("name", &DataType::name, "Registry name, or '' for a grammar string.")
      .def_prop_ro("spec", &DataType::str, "Canonical datatype string.")
      .def_prop_ro("label", &DataType::label)
      .def_prop_ro("family", [](const DataType& d) { return family_name(d.family()); })
      .def_prop_ro("group",
                   [](const DataType& d) {
                     const RegistryEntry* e = entry_of(d);
                     return e ? e->group : std::string();
                   })
      .def_prop_ro("description",
                   [](const DataType& d) {
                     const RegistryEntry* e = entry_of(d);
                     return e ? e->description : std::string();
                   })
      .def_prop_ro(
          "number", [](const DataType& d) { return d.number().name(); },
          "Element format (e2m1fnuz, int8, e4m3fn, ...).")
      .def_prop_ro("bits", [](const DataType& d) { return d.number().bits(); })
      .def_prop_ro("ebits", [](const DataType& d) { return d.number().ebits(); })
      .def_prop_ro("mbits", [](const DataType& d) { return d.number().mbits(); })
      .def_prop_ro("bias", [](const DataType& d) { return d.number().bias(); })
      .def_prop_ro("emax", [](const DataType& d) { return d.number().emax(); })
      .def_prop_ro("emin", [](const DataType& d) { return d.number().emin(); })
      .def_prop_ro(
          "max", [](const DataType& d) { return d.number().max(); },
          "Largest finite element value.")
      .def_prop_ro("min_normal", [](const DataType& d) { return d.number().min_normal(); })
      .def_prop_ro("min_subnormal", [](const DataType& d) { return d.number().min_subnormal(); })
      .def_prop_ro(
          "torch_dtype", [](const DataType& d) { return d.number().torch_name(); },
          "Name of the matching torch dtype of the element format, or ''.")
      .def_prop_ro("scale",
                   [](const DataType& d) -> std::optional<std::string> {
                     if (!d.scale()) return std::nullopt;
                     return d.scale()->scale.name();
                   })
      .def_prop_ro(
          "second",
          [](const DataType& d) -> std::optional<std::string> {
            if (!d.scale() || !d.scale()->second) return std::nullopt;
            return d.scale()->second->name();
          },
          "Zero-point format (uint data) or tensor-scale format, if any.")
      .def_prop_ro("tiles", &tiles_of, "Tile segments: dicts of size, sub, n, m.")
      .def_prop_ro("scaled", &DataType::scaled)
      .def_prop_ro("multiscale", &DataType::multiscale)
      .def_prop_ro("has_zero_point", &DataType::has_zero_point)
      .def_prop_ro("tensor_scaled", &DataType::tensor_scaled)
      .def("bits_per_value", &DataType::bits_per_value, "channel_length"_a = 0,
           "Storage bits per value including scale, zero, microexponent and mask overhead: on "
           "rows of channel_length as storage_bits counts them (partial tiles and ggml blocks "
           "whole, a tensor scale left out); without a length the nominal figure.")
      .def(
          "storage_bits",
          [](const DataType& d, const Shape& shape, const std::string& axis) {
            CastOptions o;
            AxisSpec::parse(axis).apply(o);
            return storage_bits(d, shape, o);
          },
          "shape"_a, "axis"_a = "auto",
          "Exact bits a tensor of this shape stores cast to this datatype along axis (auto: the "
          "shape's default layout): codes, every scale, zero point, mask and a tensor scale once.")
      .def("describe", &DataType::describe)
      .def(
          "codes",
          [](const DataType& d) {
            std::vector<std::pair<uint32_t, double>> out;
            for (const CodeValue& c : d.number().enumerate()) out.emplace_back(c.code, c.value);
            return out;
          },
          "Every (code, value) of an element format of at most 8 bits.")
      .def("__eq__", [](const DataType& a, const DataType& b) { return a == b; })
      .def("__hash__", [](const DataType& d) { return nb::hash(nb::str(d.str().c_str())); })
      .def("__str__", &DataType::str)
      .def("__repr__", [](const DataType& d) {
        return "DataType('" + (d.name().empty() ? d.str() : d.name()) + "')";
      });

  m.def(
      "datatypes",
      [] {
        std::vector<DataType> out;
        for (const RegistryEntry& e : registry()) out.push_back(DataType::parse(e.name));
        return out;
      },
      "Every predefined datatype, in display order.");
}

void bind_cast(nb::module_& m) {
  nb::class_<PyCastResult>(m, "CastResult")
      .def_prop_ro("dtype", &PyCastResult::dtype)
      .def_prop_ro("mode", [](const PyCastResult& r) { return to_string(r.mode()); })
      .def_prop_ro("shape", [](const PyCastResult& r) { return r.shape(); })
      .def_prop_ro("backend", [](const PyCastResult& r) { return r.r.backend(); })
      .def_prop_ro("device", [](const PyCastResult& r) { return r.r.on_device() ? "cuda" : "cpu"; })
      .def_prop_ro("values", [](const PyCastResult& r) { return r.part(exec::Part::Values); })
      .def_prop_ro("data", [](const PyCastResult& r) { return r.part(exec::Part::Codes); })
      .def_prop_ro("scale", [](const PyCastResult& r) { return r.part(exec::Part::Scale); })
      .def_prop_ro("zero", [](const PyCastResult& r) { return r.part(exec::Part::Zero); })
      .def_prop_ro("tenscale", [](const PyCastResult& r) { return r.part(exec::Part::Tenscale); })
      .def_prop_ro("meta", [](const PyCastResult& r) { return r.part(exec::Part::Meta); })
      .def_prop_ro("mask", [](const PyCastResult& r) { return r.part(exec::Part::Mask); })
      .def_prop_ro("residual", [](const PyCastResult& r) { return r.part(exec::Part::Residual); })
      .def_prop_ro("residual_scale",
                   [](const PyCastResult& r) { return r.part(exec::Part::ResidualScale); })
      .def_prop_ro("counts",
                   [](const PyCastResult& r) {
                     nb::dict d;
                     d["clipped"] = r.counts().clipped;
                     d["nonfinite"] = r.counts().nonfinite;
                     d["pruned"] = r.counts().pruned;
                     return d;
                   })
      .def("upcast",
           [](const PyCastResult& r) -> nb::object {
             // Virtual results are their values; device results carry them (cast_resident).
             if (r.mode() == CastMode::Virtual || r.r.on_device())
               return r.part(exec::Part::Values);
             JobControl job;
             const CastResult& h = r.r.host();
             return to_python(run_job(job, nb::none(), [&] { return upcast(h); }), r.fw);
           })
      .def(
          "save",
          [](const PyCastResult& r, const std::string& path, const std::string& name) {
            if (r.mode() == CastMode::Virtual) {
              io::save_npy(path, r.r.values().to_host());
            } else {
              io::save_packed(path, {{name, r.on_host()}});
            }
          },
          "path"_a, "name"_a = "tensor");

  m.def("_cast", &do_cast, "x"_a, "dtype"_a, "round"_a, "scale_mode"_a, "overflow"_a, "seed"_a,
        "axis"_a, "mode"_a, "device"_a, "tcfp_absmax"_a, "threads"_a, "as_dtype"_a, "framework"_a);
  m.def("_metrics", &do_metrics, "x"_a, "y"_a, "x_as"_a, "clipped"_a);
  m.def("_quantize", &do_quantize, "x"_a, "dtype"_a, "method"_a, "calib"_a.none(), "axis"_a,
        "damp"_a, "block"_a, "act_order"_a, "static_groups"_a, "four_over_six"_a, "name"_a,
        "as_dtype"_a, "framework"_a);
  m.def("backend_info", [] {
    const BackendInfo b = backend_info();
    nb::dict d;
    d["cuda_built"] = b.cuda_built;
    d["cuda_available"] = b.cuda_available;
    d["device_name"] = b.device_name;
    d["reason"] = b.reason;
#ifdef CASTSCOPE_HAVE_ONNX
    d["onnx_reader"] = true;
#else
    d["onnx_reader"] = false;  // built without libonnx-dev / libprotobuf-dev
#endif
    return d;
  });
  m.def("transfer_counters", [] {
    const gpu::TransferCounters c = gpu::transfer_counters();
    nb::dict d;
    d["uploads"] = c.uploads;
    d["downloads"] = c.downloads;
    d["upload_bytes"] = c.upload_bytes;
    d["download_bytes"] = c.download_bytes;
    return d;
  });
}

}  // namespace

}  // namespace castscope::py

NB_MODULE(_core, m) {
  using namespace castscope;
  namespace nb = nanobind;
  // Kept for the life of the process: the translator may run until the interpreter is gone.
  static PyObject* error_type = PyErr_NewException("castscope.Error", PyExc_RuntimeError, nullptr);
  static PyObject* cancelled_type = PyErr_NewException("castscope.Cancelled", error_type, nullptr);
  m.attr("Error") = nb::borrow(error_type);
  m.attr("Cancelled") = nb::borrow(cancelled_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Cancelled& e) {
      PyErr_SetString(cancelled_type, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
  // Notices ("no usable GPU; using the CPU backend") go to Python's warnings at the call site.
  set_notice_handler([](const std::string& msg) {
    nb::gil_scoped_acquire g;
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) != 0) PyErr_Clear();
  });
  py::bind_datatype(m);
  py::bind_cast(m);
  py::bind_model(m);
  py::bind_planner(m);
}
