// The method job: the composer's datatype (and every pinned one while Compare shows) cast by
// round to nearest and by the composer's method on the same calibration inputs, on a worker.
// Each figure is the one `castscope-cli cast --method M --calib X.npy --stats` prints for the
// tensor: weight statistics of the method's values, its output error, and rtn's beside them.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app_state.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/metrics_json.hpp"

namespace castscope::gui {

namespace {

std::string settings_key(const MethodSettings& s) {
  const MethodOptions& m = s.opt;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s|%.17g|%d|%d%d%d|%.17g|%d|%.17g|%d|%d|%d|%d|%.9g",
                to_string(m.method), m.damp, m.block, m.act_order, m.static_groups, m.four_over_six,
                m.maxshrink, m.grid, m.norm, m.awq_grid, s.calib_tokens, s.calib_outliers,
                s.calib_seed, static_cast<double>(s.calib_outlier_scale));
  return std::string(buf) + "|" + s.calib_path;
}

MethodRow run_one(const Tensor& w, const DataType& d, const CastOptions& o, const MethodOptions& m,
                  const Calibration& calib, const std::string& name, bool detail) {
  MethodRow row;
  row.dtype = d.str();
  row.name = d.name().empty() ? row.dtype : d.name();
  const CastResult rtn = cast(w, d, o);
  row.rtn = compute_stats(w, rtn.values, rtn.counts.clipped);
  row.rtn_out_relerr = calibration_rel_error(calib.inputs, w, rtn.values, o, name);
  const MethodResult r = quantize(w, d, o, m, calib, name);
  Tensor values = method_values(r);
  row.method = compute_stats(w, values, r.cast.counts.clipped);
  row.method_out_relerr = calibration_rel_error(calib.inputs, w, values, o, name);
  row.method_output_error = r.output_error;
  if (detail && m.method == Method::GPTQ) {
    // The nearest codes on the method's own scales: what GPTQ's column-by-column rounding
    // moved away from.
    const CastResult near = cast_with_scales(w, r.cast);
    row.nearest = upcast(near);
    row.codes = r.cast.codes;
    row.nearest_codes = near.codes;
    const float* a = values.ptr<float>();
    const float* b = row.nearest.ptr<float>();
    for (int64_t i = 0; i < values.numel(); ++i) row.moved += a[i] != b[i];
  }
  if (detail) row.values = std::move(values);
  return row;
}

}  // namespace

void update_method_jobs(AppState& app) {
  std::shared_ptr<const MethodRun> run;
  std::string err;
  bool cancelled = false;
  if (app.method_job.poll(&run, &err, &cancelled)) {
    if (!err.empty()) {
      app.method_error = err;
      app.note("method: " + err);
    } else if (cancelled) {
      app.note("method comparison cancelled");
    } else if (run) {
      app.method_run = run;
      app.method_error.clear();
    }
  }
  const MethodSettings& s = app.method;
  const bool wanted =
      app.shown(PanelId::Views) || app.shown(PanelId::Compare) || app.shown(PanelId::Teach);
  if (s.opt.method == Method::RTN) {
    app.method_job.cancel();
    app.started_method.clear();
    return;
  }
  if (!wanted) return;
  const bool input = app.loaded && app.loaded->data && !app.loader.running();
  if (!input) {
    if (app.loader.running()) app.pending = true;
    return;
  }
  CastOptions o = composer_cast_options(app);
  if (app.model)
    if (const io::TensorInfo* t = app.model->find(app.loaded->tensor)) {
      try {
        o = io::cast_options_for(o, *t);
      } catch (const Error&) {
        // an axis out of range: the cast reports it
      }
    }
  o.device = Device::Auto;
  std::vector<DataType> dtypes = {app.composer.dtype};
  if (app.shown(PanelId::Compare))
    for (const std::string& p : app.pinned) try {
        const DataType d = DataType::parse(p);
        if (!(d == app.composer.dtype)) dtypes.push_back(d);
      } catch (const Error&) {
        // the comparison names a datatype that does not parse
      }
  std::string key = app.loaded->tensor + "|" + settings_key(s) + "|" + AxisSpec::from(o).str() +
                    "|" + to_string(o.round) + to_string(o.scale_mode) + to_string(o.overflow) +
                    "|" + std::to_string(app.view_rotate);
  for (const DataType& d : dtypes) key += "|" + d.str();
  if (key == app.started_method) return;
  app.started_method = key;
  if (app.view_rotate > 0) {
    // Methods take the weight as it is; a rotated method is not offered yet.
    app.method_job.cancel();
    app.method_run.reset();
    app.method_error =
        "methods run on the unrotated weight: set the Hadamard rotation to none to compare "
        "round to nearest with " +
        std::string(to_string(s.opt.method));
    return;
  }
  app.method_error.clear();
  auto in = app.loaded;
  const MethodSettings set = s;
  app.method_job.start(
      std::string(to_string(s.opt.method)) + " beside rtn",
      [in, set, o, dtypes, key](JobControl& job) {
        auto r = std::make_shared<MethodRun>();
        r->key = key;
        r->tensor = in->tensor;
        r->method = to_string(set.opt.method);
        const Tensor& w = in->data;
        if (w.rank() < 2)
          throw Error(in->tensor + ": a method quantizes a weight of rank 2 or more");
        r->in = axis_length(o, w.shape());
        Calibration calib;
        if (set.calib_path[0]) {
          calib.inputs = io::load_npy(set.calib_path);
          r->calib = set.calib_path;
        } else {
          calib.inputs =
              synthetic_activations(set.calib_tokens, r->in, set.calib_outliers,
                                    set.calib_outlier_scale, static_cast<uint64_t>(set.calib_seed));
          char buf[160];
          std::snprintf(buf, sizeof buf, "synthetic %d x %lld, %d outlier channels x %g, seed %d",
                        set.calib_tokens, static_cast<long long>(r->in), set.calib_outliers,
                        static_cast<double>(set.calib_outlier_scale), set.calib_seed);
          r->calib = buf;
        }
        r->tokens = calib.inputs.rank() >= 1 ? calib.inputs.shape()[0] : 0;
        for (size_t i = 0; i < dtypes.size(); ++i) {
          job.check();
          try {
            r->rows.push_back(run_one(w, dtypes[i], o, set.opt, calib, in->tensor, i == 0));
          } catch (const Error& e) {
            MethodRow row;
            row.dtype = row.name = dtypes[i].str();
            row.error = e.what();
            r->rows.push_back(std::move(row));
          }
          job.report(static_cast<double>(i + 1) / static_cast<double>(dtypes.size()));
        }
        return std::shared_ptr<const MethodRun>(r);
      });
}

}  // namespace castscope::gui

namespace castscope::gui {

std::string method_state_json(const AppState& app) {
  const MethodSettings& s = app.method;
  const MethodOptions& m = s.opt;
  nlohmann::json j = {{"method", to_string(m.method)},
                      {"damp", m.damp},
                      {"block", m.block},
                      {"act_order", m.act_order},
                      {"static_groups", m.static_groups},
                      {"four_over_six", m.four_over_six},
                      {"calib",
                       {{"path", s.calib_path},
                        {"tokens", s.calib_tokens},
                        {"outliers", s.calib_outliers},
                        {"outlier_scale", s.calib_outlier_scale},
                        {"seed", s.calib_seed}}},
                      {"error", app.method_error}};
  if (const MethodRun* r = app.method_run.get()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const MethodRow& row : r->rows) {
      nlohmann::json o = {{"dtype", row.dtype}, {"error", row.error}};
      if (row.error.empty()) {
        nlohmann::json rtn, me;
        metrics_json::put_stats(rtn, row.rtn);
        metrics_json::put_stats(me, row.method);
        metrics_json::put_number(rtn, "out_relerr", row.rtn_out_relerr);
        metrics_json::put_number(me, "out_relerr", row.method_out_relerr);
        metrics_json::put_number(me, "output_error", row.method_output_error);
        o["rtn"] = rtn;
        o["method"] = me;
        if (row.nearest) o["moved"] = row.moved;
      }
      rows.push_back(o);
    }
    j["run"] = {{"tensor", r->tensor}, {"method", r->method}, {"calib", r->calib},
                {"tokens", r->tokens}, {"in", r->in},         {"rows", rows}};
  }
  return j.dump();
}

}  // namespace castscope::gui
