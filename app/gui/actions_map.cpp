// Model map and activation jobs: the sweep and the linear-layer error run on workers with
// progress and cancel; a click on a map cell becomes a plan rule for that tensor.
#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "app_state.hpp"
#include "castscope/storage_bits.hpp"

namespace castscope::gui {

Rotation map_rotation(const AppState& app) {
  Rotation r;
  r.size = app.map_rotate;
  r.random_signs = app.map_rotate > 0 && app.map_signs;
  r.seed = static_cast<uint64_t>(app.map_seed);
  return r;
}

namespace {
// Sweeps app.model with app.map_request: every row, or (base given) the rows named in `only`,
// put in place of base's.
void launch_map(AppState& app, std::shared_ptr<const ModelMap> base,
                std::vector<std::string> only) {
  const AppState::MapRequest req = app.map_request;
  auto model = app.model;
  app.map_redo = only;
  app.map_job.start(base ? "model map rows" : "model map", [=](JobControl& job) {
    MapOptions o = req.o;
    // Activations as the activations panel described them; the feature count of a synthetic
    // set is the most common input width of the model's weights.
    if (req.with_act) {
      if (req.act_path.empty()) {
        std::map<int64_t, int> widths;
        for (const io::TensorInfo& t : model->tensors())
          if (t.shape.size() == 2 && map_considers(t, o)) ++widths[t.shape[1]];
        if (widths.empty()) throw Error("no 2-D weight to take activations");
        const auto best = std::max_element(widths.begin(), widths.end(),
                                           [](auto& a, auto& b) { return a.second < b.second; });
        o.activations = synthetic_activations(req.tokens, best->first, req.outliers, req.scale,
                                              static_cast<uint64_t>(req.seed));
      } else {
        o.activations = load_activations(req.act_path).to_f32();
        const int64_t f = o.activations.shape().back();
        o.activations = o.activations.reshaped({o.activations.numel() / f, f});
      }
      o.max_tokens = req.tokens;
    }
    if (!base)
      return std::shared_ptr<const ModelMap>(
          std::make_shared<ModelMap>(sweep_model(*model, o, &job)));
    // Only the rows whose layout changed are swept again.
    std::vector<io::TensorInfo> some;
    for (const io::TensorInfo& t : model->tensors())
      if (std::find(only.begin(), only.end(), t.name) != only.end()) some.push_back(t);
    ModelMap part = sweep_model(*io::relist(model, std::move(some)), o, &job);
    auto out = std::make_shared<ModelMap>(*base);
    for (MapRow& r : part.rows)
      for (MapRow& row : out->rows)
        if (row.name == r.name) row = std::move(r);
    return std::shared_ptr<const ModelMap>(out);
  });
}
}  // namespace

void start_model_map(AppState& app) {
  if (!app.model) {
    app.map_error = "open a model first";
    return;
  }
  MapOptions o;
  std::istringstream ss(app.map_dtypes);
  for (std::string d; ss >> d;) o.dtypes.push_back(d);
  o.cast.device = Device::Auto;
  // The composer's axis (auto by default: each tensor's resolved layout), as `castscope-cli map`
  // takes --axis, so every cell equals the CLI's figure.
  app.composer.axis.apply(o.cast);
  o.cast.rotate = map_rotation(app);
  try {
    validate_rotation(o.cast.rotate);
    for (const std::string& d : o.dtypes) DataType::parse(d);
    if (o.dtypes.empty()) throw Error("list at least one datatype");
  } catch (const Error& e) {
    app.map_error = e.what();
    return;
  }
  app.map_error.clear();
  app.map_request = {o,
                     app.map_activations,
                     app.act_path,
                     app.act_tokens,
                     app.act_outliers,
                     app.act_seed,
                     app.act_outlier_scale,
                     app.file_model};
  launch_map(app, nullptr, {});
}

void redo_map_rows(AppState& app, const std::vector<std::string>& names) {
  if (app.map_request.file.lock() != app.file_model) return;  // the map is another file's
  std::vector<std::string> redo;
  if (app.map_job.running()) {
    if (app.map_redo.empty()) {  // a whole sweep on the model that was: start it again
      launch_map(app, nullptr, {});
      return;
    }
    redo = app.map_redo;  // the rows the superseded job was sweeping again
  } else if (!app.model_map) {
    return;
  }
  for (const std::string& n : names)
    if (std::find(redo.begin(), redo.end(), n) == redo.end()) redo.push_back(n);
  // Only rows the map holds (a tensor it leaves out stays out).
  std::erase_if(redo, [&](const std::string& n) {
    return std::none_of(app.model_map->rows.begin(), app.model_map->rows.end(),
                        [&](const MapRow& r) { return r.name == n; });
  });
  if (!redo.empty()) launch_map(app, app.model_map, redo);
}

void assign_from_map(AppState& app, size_t row, size_t col) {
  const ModelMap* m = app.model_map.get();
  if (!m || row >= m->rows.size() || col >= m->columns.size()) return;
  const MapRow& r = m->rows[row];
  // An exact rule for this tensor; rules added by the map go first, so the click wins.
  std::string glob;
  for (char c : r.name) {
    if (c == '*' || c == '?' || c == '[') {
      glob.clear();
      break;
    }
    glob += c;
  }
  std::string pattern = glob;
  if (pattern.empty()) {
    pattern = "re:^";
    for (char c : r.name) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
    pattern += "$";
  }
  add_plan_rule(app, pattern, m->columns[col]);
  if (!app.plan.rules.empty() && app.plan.rules.front().pattern == pattern) {
    // The map's cells were computed with its rotation: the plan records the same one.
    ExportPlan p = app.plan;
    p.rules.front().rotate = m->rotate;
    app.plan = parse_plan(plan_to_json(p), "plan");
  }
}

CastOptions plan_tensor_options(const ExportPlan& plan, const io::TensorInfo& t, CastOptions base) {
  if (const std::optional<AxisSpec> ax = plan.axis_for(t)) ax->apply(base);
  return io::cast_options_for(base, t);
}

double map_cell_bits(const AppState& app, const MapRow& r, size_t col, double* nominal,
                     int64_t* row_length) {
  const ModelMap* m = app.model_map.get();
  if (!m || col >= m->dtypes.size()) return std::numeric_limits<double>::quiet_NaN();
  try {
    const CastOptions o = options_for(app.map_request.o.cast, r.shape, r.layout);
    return widgets::storage_bits_per_value(m->dtypes[col], r.shape, o, nominal, row_length);
  } catch (const Error&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

MapTotals plan_totals_over_map(const AppState& app) {
  MapTotals t;
  const ModelMap* m = app.model_map.get();
  if (!m) return t;
  const CastOptions base = composer_cast_options(app);
  for (const MapRow& r : m->rows) {
    const double n = static_cast<double>(r.numel);
    const double stored = 8.0 * static_cast<double>(r.stored_bytes);
    t.values += r.numel;
    t.stored_bits += stored;
    const io::TensorInfo info{r.name, r.stored_dtype, r.shape, r.stored_bytes, "", r.layout};
    const auto d = app.plan.dtype_for(info);
    if (!d) {
      t.bits += stored;
      continue;
    }
    // The export's own size: storage_bits on the axis the plan casts the tensor along.
    try {
      t.bits +=
          static_cast<double>(storage_bits(*d, r.shape, plan_tensor_options(app.plan, info, base)));
    } catch (const Error&) {
      t.bits += d->bits_per_value(r.channel()) * n;
    }
  }
  return t;
}

void start_activations(AppState& app) {
  if (!app.loaded || !app.loaded->data || app.loaded->data.rank() < 2) {
    app.act_error = "select a weight tensor (rank 2 or more) first";
    return;
  }
  LinearErrorOptions o;
  // The weight meets the activations along its resolved reduction axis (a plan's override
  // included), as the model map and the planner read it: a MatMul B [K, N] or GPT-2's Conv1D
  // [in, out] is read transposed, a conv [O, I, k...] as [O, I*k...].
  CastOptions layout;
  layout.axis_auto = true;  // the tensor's layout decides
  int64_t in = app.loaded->data.shape().back();
  {
    const auto& input = app.loaded;
    const io::Model* lm = input->model == app.file_model ? app.model.get() : input->model.get();
    try {
      if (lm)
        if (const io::TensorInfo* t = lm->find(input->tensor))
          layout = io::cast_options_for(layout, *t);
      in = axis_length(layout, input->data.shape());
    } catch (const Error& e) {
      app.act_error = e.what();
      return;
    }
  }
  o.weight_axis = AxisSpec::from(layout);
  try {
    if (std::string(app.act_dtype) != "keep") o.act_dtype = DataType::parse(app.act_dtype);
    if (std::string(app.act_weight_dtype) != "keep")
      o.weight_dtype = DataType::parse(app.act_weight_dtype);
    o.cast.rotate.size = app.act_rotate;
    o.cast.rotate.random_signs = app.act_rotate > 0;
    o.cast.rotate.seed = static_cast<uint64_t>(app.act_seed);
    validate_rotation(o.cast.rotate);
  } catch (const Error& e) {
    app.act_error = e.what();
    return;
  }
  o.max_tokens = app.act_tokens;
  app.act_error.clear();
  auto input = app.loaded;
  const std::string path = app.act_path;
  const int64_t tokens = app.act_tokens;
  const int outliers = app.act_outliers, seed = app.act_seed;
  const double scale = app.act_outlier_scale;
  app.act_weight = input->tensor;
  app.act_job.start("activations", [=](JobControl& job) {
    const Tensor& w = input->data;
    Tensor x = path.empty()
                   ? synthetic_activations(tokens, in, outliers, scale, static_cast<uint64_t>(seed))
                   : load_activations(path);
    return std::shared_ptr<const LinearError>(
        std::make_shared<LinearError>(linear_error(x, w, o, &job)));
  });
}

void update_map_jobs(AppState& app) {
  std::shared_ptr<const ModelMap> m;
  std::string err;
  bool cancelled = false;
  if (app.map_job.poll(&m, &err, &cancelled)) {
    app.map_redo.clear();
    if (!err.empty()) {
      app.map_error = err;
      app.note(err);
    } else if (cancelled) {
      app.note("model map cancelled");
    } else if (m) {
      app.model_map = m;
    }
  }
  std::shared_ptr<const LinearError> le;
  if (app.act_job.poll(&le, &err, &cancelled)) {
    if (!err.empty()) {
      app.act_error = err;
      app.note(err);
    } else if (le) {
      app.act_result = le;
    }
  }
}

}  // namespace castscope::gui
