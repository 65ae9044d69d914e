// The model map sweep (castscope/modelmap.hpp).
#include "castscope/modelmap.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <regex>

#include "castscope/executor.hpp"
#include "castscope/storage_bits.hpp"
#include "backends/cuda/sweep_pipeline.hpp"

namespace castscope {

MapMetric parse_map_metric(std::string_view s) {
  if (s == "snr") return MapMetric::SNR;
  if (s == "relerr") return MapMetric::RelErr;
  if (s == "maxerr") return MapMetric::MaxErr;
  if (s == "clipped") return MapMetric::Clipped;
  if (s == "outsnr") return MapMetric::OutputSNR;
  throw Error("metric '" + std::string(s) + "': expected snr, relerr, maxerr, clipped or outsnr");
}

const char* to_string(MapMetric m) {
  switch (m) {
    case MapMetric::SNR:
      return "snr";
    case MapMetric::RelErr:
      return "relerr";
    case MapMetric::MaxErr:
      return "maxerr";
    case MapMetric::Clipped:
      return "clipped";
    case MapMetric::OutputSNR:
      return "outsnr";
  }
  return "?";
}

bool higher_is_better(MapMetric m) {
  return m == MapMetric::SNR || m == MapMetric::OutputSNR;
}

double cell_value(const MapCell& c, MapMetric m) {
  if (!c.error.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (m == MapMetric::OutputSNR)
    return c.has_output ? c.out_snr_db : std::numeric_limits<double>::quiet_NaN();
  return metric_value(c.stats, m);
}

double metric_value(const Stats& s, MapMetric m) {
  switch (m) {
    case MapMetric::SNR:
      return s.snr_db;
    case MapMetric::RelErr:
      if (s.signal_power == 0) return s.mse == 0 ? 0.0 : std::numeric_limits<double>::infinity();
      return std::sqrt(s.mse / s.signal_power);
    case MapMetric::MaxErr:
      return s.max_abs_err;
    case MapMetric::Clipped:
      return s.clipped_pct();
    case MapMetric::OutputSNR:
      break;  // not a property of the weight alone: cell_value
  }
  return std::numeric_limits<double>::quiet_NaN();
}

bool is_embedding_tensor(const std::string& name) {
  static const std::regex re(
      R"((^|\.)(embed_tokens|embed_positions|wte|wpe|tok_embeddings|word_embeddings|position_embeddings|token_embd)(\.|$))");
  return std::regex_search(name, re);
}

bool map_considers(const io::TensorInfo& info, const MapOptions& o) {
  if (!io::is_float_storage(info.dtype) || numel(info.shape) == 0) return false;
  if (info.shape.size() < 2 && !o.include_1d) return false;
  if (!o.include_embeddings && (info.layout.embedding || is_embedding_tensor(info.name)))
    return false;
  return true;
}

void layer_and_block(const std::string& name, std::string& layer, std::string& block) {
  layer.clear();
  block.clear();
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    const std::string part = name.substr(start, dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
      layer = name.substr(0, dot);
      if (dot < name.size()) {
        const size_t next = name.find('.', dot + 1);
        block =
            name.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
        if (next == std::string::npos) block.clear();  // "layers.3.weight": no block
      }
      return;
    }
    start = dot + 1;
  }
}

ModelMap sweep_model(const io::Model& model, const MapOptions& o, JobControl* job,
                     const std::function<void(const MapRow&)>& on_row) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelMap map;
  map.rotate = o.cast.rotate;
  if (o.dtypes.empty()) throw Error("model map: no datatypes given");
  const std::vector<MethodOptions> methods =
      o.methods.empty() ? std::vector<MethodOptions>{MethodOptions{}} : o.methods;
  std::vector<const MethodOptions*> column_method;
  for (const std::string& s : o.dtypes)
    for (const MethodOptions& m : methods) {
      map.dtypes.push_back(DataType::parse(s));
      map.columns.push_back(m.method == Method::RTN ? s : s + "@" + to_string(m.method));
      map.methods.push_back(m.method);
      map.method_options.push_back(m);
      column_method.push_back(&m);
    }
  validate_rotation(o.cast.rotate, "model map rotation");
  std::optional<std::regex> re;
  if (!o.filter.empty()) {
    try {
      re.emplace(o.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("model map: filter '" + o.filter + "' is not a valid regular expression (" +
                  e.what() + ")");
    }
  }
  std::vector<const io::TensorInfo*> todo;
  uint64_t total_bytes = 0;
  for (const io::TensorInfo& t : model.tensors()) {
    if (re && !std::regex_search(t.name, *re)) continue;
    if (!map_considers(t, o)) continue;
    todo.push_back(&t);
    total_bytes += std::max<uint64_t>(t.nbytes, 1);
  }
  // Bits per value with the channel length of the typical row (the longest quantization axis).
  int64_t last = 0;
  for (const io::TensorInfo* t : todo) {
    try {
      last = std::max(last, axis_length(io::cast_options_for(o.cast, *t), t->shape));
    } catch (const Error&) {
      last = std::max(last, t->shape.back());  // an axis out of range: the cell says why
    }
  }
  for (const DataType& d : map.dtypes) {
    map.bits.push_back(d.bits_per_value(last));
    map.nominal_bits.push_back(d.bits_per_value());
  }

  // The executor decides once where the sweep runs. On the device each tensor is uploaded once
  // and cast to every datatype there, skipping a host round trip per cell; rotations go through
  // cast(), which places them itself.
  exec::Sweep sweep(exec::current(), o.cast.device, !o.cast.rotate.enabled(), job);
  // The activations and each weight cross PCIe once for all their datatype columns.
  LinearReuse linear;
  map.backend = sweep.backend();
  // On the CUDA backend the tensors stream onto the device ahead of their cells, read and
  // uploaded while the cells of earlier tensors run (cuda/sweep_pipeline.hpp).
  std::unique_ptr<gpu::TensorStream> stream;
  if (sweep.on_device() && exec::current().backend_ptr() == exec::cuda_backend()) {
    std::vector<std::string> names;
    for (const io::TensorInfo* t : todo) names.push_back(t->name);
    try {
      stream = gpu::open_tensor_stream(model, std::move(names));
    } catch (const Error&) {
      // no pinned memory: each tensor is loaded and uploaded in turn
    }
  }
  uint64_t done_bytes = 0;
  const double ncols = static_cast<double>(map.dtypes.size());
  for (const io::TensorInfo* info : todo) {
    if (job) job->check();
    const double base = total_bytes ? static_cast<double>(done_bytes) / total_bytes : 0.0;
    const double width =
        total_bytes ? static_cast<double>(std::max<uint64_t>(info->nbytes, 1)) / total_bytes : 0.0;
    MapRow row;
    row.name = info->name;
    row.stored_dtype = info->dtype;
    row.shape = info->shape;
    row.numel = numel(info->shape);
    row.stored_bytes = info->nbytes;
    row.layout = info->layout;
    // The tensor's own reduction axis (its resolved layout) unless the sweep names one.
    CastOptions tensor_cast = o.cast;
    try {
      tensor_cast = io::cast_options_for(o.cast, *info);
      row.axis = describe_axis(tensor_cast, info->shape);
      row.axis_length = axis_length(tensor_cast, info->shape);
    } catch (const Error&) {
      // an axis out of range for this tensor: every cell says why
    }
    layer_and_block(info->name, row.group, row.block);
    gpu::DeviceTensor streamed = stream ? stream->next() : gpu::DeviceTensor();
    Tensor x;
    try {
      if (!streamed) x = model.load(info->name);
    } catch (const Error& e) {
      map.skipped.emplace_back(info->name, e.what());
      done_bytes += std::max<uint64_t>(info->nbytes, 1);
      continue;
    }
    // A streamed tensor is read on the host only where a cell needs it there.
    auto host_x = [&]() -> const Tensor& {
      if (!x) x = model.load(info->name);
      return x;
    };
    {
      // Drop the tensor's mapped pages when done: resident memory stays about one tensor.
      struct Release {
        const io::Model& model;
        const std::string& name;
        ~Release() { io::release_pages(model, name); }
      } release{model, info->name};
      struct NextTensor {
        exec::Sweep& sweep;
        ~NextTensor() { sweep.next_tensor(); }  // the device copy goes with the tensor
      } next_tensor{sweep};
      if (streamed) sweep.use_device_copy(exec::cuda_handle(streamed));
      for (size_t d = 0; d < map.dtypes.size(); ++d) {
        exportdetail::SubJob sub(job, base + width * d / ncols, width / ncols);
        CastOptions co = tensor_cast;
        co.mode = CastMode::Virtual;
        co.job = job ? &sub.inner : nullptr;
        MapCell cell;
        try {
          cell.storage_bits = storage_bits(map.dtypes[d], info->shape, co);
          const Tensor calib = o.calib ? o.calib(info->name) : Tensor();
          Tensor q;  // the cell's values, where the output error on the calibration needs them
          if (map.methods[d] != Method::RTN) {
            CastOptions mo = tensor_cast;
            mo.mode = CastMode::Actual;
            const MethodResult r =
                quantize(host_x(), map.dtypes[d], mo, *column_method[d], {calib}, info->name);
            q = method_values(r);
            cell.stats = compute_stats(host_x(), q, r.cast.counts.clipped);
          } else {
            cell.stats = sweep.cast_stats(host_x, map.dtypes[d], co);
            if (calib) q = cast(host_x(), map.dtypes[d], co).values;
          }
          if (calib) {
            cell.calib_rel_err = calibration_rel_error(calib, host_x(), q, tensor_cast, info->name);
            cell.has_calib = true;
          }
          // The activations meet the weight along its resolved reduction axis.
          if (o.activations && info->shape.size() >= 2 && o.activations.rank() == 2 &&
              o.activations.shape()[1] == axis_length(tensor_cast, info->shape)) {
            LinearErrorOptions lo;
            lo.cast = o.cast;
            lo.weight_axis = AxisSpec::from(tensor_cast);
            lo.max_tokens = o.max_tokens;
            lo.gemm_iters = 1;  // the map reports errors; one timed GEMM per cell is enough
            lo.weight_dtype = map.dtypes[d];
            if (!o.act_keep) lo.act_dtype = o.act_dtype ? *o.act_dtype : map.dtypes[d];
            const LinearError le = linear_error(o.activations, host_x(), lo, co.job, &linear);
            cell.has_output = true;
            cell.out_snr_db = le.snr_db;
            cell.out_rel_err = le.rel_err;
            cell.out_product = le.product;
          }
        } catch (const Cancelled&) {
          throw;
        } catch (const Error& e) {
          cell.error = e.what();
        }
        row.cells.push_back(std::move(cell));
      }
    }
    x = Tensor();
    map.backend = sweep.backend();  // "cpu" once an upload failed
    done_bytes += std::max<uint64_t>(info->nbytes, 1);
    map.values += row.numel;
    if (job) job->report(static_cast<double>(done_bytes) / std::max<uint64_t>(total_bytes, 1));
    map.rows.push_back(std::move(row));
    if (on_row) on_row(map.rows.back());
  }
  map.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  map.linear_uploads = linear.uploads();
  return map;
}

MapTotals map_totals(const ModelMap& map, const std::vector<int>& choice) {
  MapTotals t;
  for (size_t i = 0; i < map.rows.size(); ++i) {
    const MapRow& r = map.rows[i];
    const double n = static_cast<double>(r.numel);
    const double stored = 8.0 * static_cast<double>(r.stored_bytes);
    t.values += r.numel;
    t.stored_bits += stored;
    const int c = i < choice.size() ? choice[i] : -1;
    if (c >= 0 && c < static_cast<int>(map.dtypes.size()) &&
        static_cast<size_t>(c) < r.cells.size() && r.cells[static_cast<size_t>(c)].storage_bits)
      t.bits += static_cast<double>(r.cells[static_cast<size_t>(c)].storage_bits);
    else if (c >= 0 && c < static_cast<int>(map.dtypes.size()))
      t.bits += map.dtypes[static_cast<size_t>(c)].bits_per_value(r.channel()) * n;
    else
      t.bits += stored;
  }
  return t;
}

ExportPlan plan_from_map(const ModelMap& map, const std::vector<int>& choice,
                         const Rotation& rotate) {
  ExportPlan plan;
  plan.source = "<model map>";
  for (size_t i = 0; i < map.rows.size() && i < choice.size(); ++i) {
    const int c = choice[i];
    if (c < 0 || c >= static_cast<int>(map.dtypes.size())) continue;
    PlanRule rule;
    // Glob metacharacters in a name would widen the rule; a regex anchored on the escaped name
    // matches exactly this tensor.
    std::string esc;
    for (char ch : map.rows[i].name) {
      if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) esc += '\\';
      esc += ch;
    }
    rule.pattern = "re:^" + esc + "$";
    rule.re = std::make_shared<std::regex>("^" + esc + "$", std::regex::ECMAScript);
    rule.target = map.dtypes[static_cast<size_t>(c)];
    rule.dtype = rule.target->str();
    rule.rotate = rotate;
    // A method column's rule carries its method, so the export runs it.
    if (static_cast<size_t>(c) < map.method_options.size() &&
        map.method_options[static_cast<size_t>(c)].method != Method::RTN)
      rule.method = map.method_options[static_cast<size_t>(c)];
    plan.rules.push_back(std::move(rule));
  }
  return plan;
}

}  // namespace castscope
