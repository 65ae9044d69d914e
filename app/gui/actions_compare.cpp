// Background work of the comparison, plan, export and matmul panels. Each job starts when its
// panel is visible and its inputs changed; a newer start cancels an older one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>

#include "app_state.hpp"
#include "castscope/autoplan.hpp"
#include "castscope/planner.hpp"

namespace castscope::gui {

namespace {

std::string options_key(const AppState& app) {
  return std::string(to_string(app.composer.round)) + "/" + to_string(app.composer.overflow) + "/" +
         app.composer.axis.str();
}

template <class R>
void collect(Job<R>& job, std::shared_ptr<const R>* out, std::string* error, AppState& app) {
  std::shared_ptr<const R> r;
  std::string err;
  if (!job.poll(&r, &err)) return;
  if (!err.empty()) {
    if (error) *error = err;
    app.note(err);
  } else if (r) {
    *out = r;
    if (error) error->clear();
  }
}

}  // namespace

CastOptions composer_cast_options(const AppState& app) {
  CastOptions o;
  o.round = app.composer.round;
  o.scale_mode = app.composer.scale_mode;
  o.overflow = app.composer.overflow;
  app.composer.axis.apply(o);
  return o;
}

namespace {
// The composer's options for the loaded tensor: an automatic axis is its resolved layout (a
// plan's override included), as the Views take it.
CastOptions loaded_cast_options(const AppState& app) {
  CastOptions o = composer_cast_options(app);
  if (app.model && app.loaded)
    if (const io::TensorInfo* t = app.model->find(app.loaded->tensor)) {
      try {
        o = io::cast_options_for(o, *t);
      } catch (const Error&) {
        // an axis out of range: the cast reports it
      }
    }
  return o;
}
}  // namespace

void update_decision_jobs(AppState& app) {
  collect(app.scale_job, &app.scale_modes, nullptr, app);
  collect(app.compare_job, &app.compare, nullptr, app);
  collect(app.plan_job, &app.plan_eval, nullptr, app);
  std::string auto_err;
  std::shared_ptr<const AutoAssignResult> autos;
  collect(app.auto_job, &autos, &auto_err, app);
  if (autos) {
    app.auto_result = autos;
    for (const auto& [name, pick] : autos->picks) {
      if (pick.dtype.empty()) continue;
      const std::string pat = widgets::glob_escape(name);
      std::erase_if(app.plan.rules,
                    [&](const PlanRule& r) { return r.pattern == pat && !r.axis_only; });
      PlanRule r;
      r.pattern = pat;
      r.dtype = pick.dtype;
      r.target = DataType::parse(pick.dtype);
      app.plan.rules.insert(app.plan.rules.begin(), r);
    }
    try {
      app.plan = parse_plan(plan_to_json(app.plan), "plan");
    } catch (const Error& e) {
      app.note(e.what());
    }
  }
  collect(app.export_job, &app.export_done, &app.export_error, app);
  collect(app.gemm_job, &app.gemm, &app.gemm_error, app);

  app.pending = false;
  const bool input = app.loaded && app.loaded->data && !app.loader.running();
  const bool wants_input = app.shown(PanelId::ScaleModes) || app.shown(PanelId::Compare);
  if (wants_input && !input) app.pending = app.loader.running();
  if (input && app.shown(PanelId::ScaleModes)) {
    const CastOptions o = loaded_cast_options(app);
    const std::string key = app.loaded->tensor + "|" + app.composer.dtype.str() + "|" +
                            options_key(app) + "|" + AxisSpec::from(o).str();
    if (key != app.started_scale) {
      app.started_scale = key;
      auto in = app.loaded;
      const DataType d = app.composer.dtype;
      app.scale_job.start("compare scale modes", [in, d, o, key](JobControl& job) {
        auto r = std::make_shared<ScaleModeResult>();
        r->key = key;
        r->runs = widgets::compare_scale_modes(in->data, d, o, in->tensor, &job, in->device.get());
        return std::shared_ptr<const ScaleModeResult>(r);
      });
    }
  }
  if (input && app.shown(PanelId::Compare)) {
    const CastOptions o = loaded_cast_options(app);
    std::string key = app.loaded->tensor + "|" + options_key(app) + "|" +
                      to_string(app.composer.scale_mode) + "|" + AxisSpec::from(o).str();
    for (const std::string& p : app.pinned) key += "|" + p;
    if (key != app.started_compare) {
      app.started_compare = key;
      auto in = app.loaded;
      const auto pinned = app.pinned;
      app.compare_job.start("compare datatypes", [in, pinned, o, key](JobControl& job) {
        auto r = std::make_shared<CompareResult>();
        r->key = key;
        widgets::AnalysisOptions ao;
        ao.keep_values = false;  // the comparison shows views only
        for (size_t i = 0; i < pinned.size(); ++i) {
          job.check();
          try {
            r->rows.push_back(widgets::analyze(in->data, DataType::parse(pinned[i]), o, in->tensor,
                                               ao, nullptr, in->device.get()));
          } catch (const Cancelled&) {
            throw;
          } catch (const Error& e) {
            r->errors.push_back(pinned[i] + ": " + e.what());
          }
          job.report(static_cast<double>(i + 1) / pinned.size());
        }
        return std::shared_ptr<const CompareResult>(r);
      });
    }
  }
  if (app.model && (app.shown(PanelId::Plan) || app.shown(PanelId::Export))) {
    char ptr[32];
    std::snprintf(ptr, sizeof ptr, "%p|", static_cast<const void*>(app.model.get()));
    const std::string key =
        ptr + plan_to_json(app.plan) + options_key(app) + to_string(app.composer.scale_mode);
    if (key != app.started_plan) {
      app.started_plan = key;
      auto model = app.model;
      const ExportPlan plan = app.plan;
      const CastOptions o = composer_cast_options(app);
      app.plan_job.start("evaluate plan", [model, plan, o, key](JobControl& job) {
        auto r = std::make_shared<PlanResult>();
        r->key = key;
        const auto& ts = model->tensors();
        double bit_sum = 0;
        for (size_t i = 0; i < ts.size(); ++i) {
          job.check();
          const io::TensorInfo& t = ts[i];
          PlanRow row;
          row.name = t.name;
          row.shape = t.shape;
          row.bytes_in = t.nbytes;
          const int64_t n = numel(t.shape);
          std::optional<DataType> d;
          try {
            d = plan.dtype_for(t);
          } catch (const Error& e) {
            row.error = e.what();
          }
          if (!d) {
            row.dtype = "keep";
            row.bits = n ? 8.0 * t.nbytes / n : 0;
            row.snr_db = std::numeric_limits<double>::infinity();
            row.bytes_out = t.nbytes;
          } else {
            row.dtype = d->str();
            CastOptions co = o;
            if (const std::optional<AxisSpec> ax = plan.axis_for(t)) ax->apply(co);
            row.layout_guessed = t.layout.guessed && co.axis_auto;
            try {
              co = plan_tensor_options(plan, t, o);  // auto: the tensor's resolved layout
              row.axis = describe_axis(co, t.shape);
            } catch (const Error&) {
              // an axis out of range: the cast below reports it
            }
            try {
              row.bits = d->bits_per_value(axis_length(co, t.shape));
            } catch (const Error&) {
              row.bits = d->bits_per_value(t.shape.empty() ? 1 : t.shape.back());
            }
            try {
              const uint64_t bits = storage_bits(*d, t.shape, co);
              row.bytes_out = (bits + 7) / 8;
              if (n) row.bits = static_cast<double>(bits) / static_cast<double>(n);
            } catch (const Error&) {
              row.bytes_out = static_cast<uint64_t>(std::ceil(row.bits * n / 8.0));
            }
            try {
              co.mode = CastMode::Virtual;
              co.rotate = plan.rotation_for(t);
              const Tensor x = model->load(t.name);
              const CastResult c = cast(x, *d, co);
              row.snr_db = compute_stats(x, c.values, c.counts.clipped).snr_db;
            } catch (const Cancelled&) {
              throw;
            } catch (const Error& e) {
              row.error = e.what();
              row.snr_db = std::numeric_limits<double>::quiet_NaN();
            }
          }
          r->bytes_in += row.bytes_in;
          r->bytes_out += row.bytes_out;
          r->values += static_cast<uint64_t>(n);
          bit_sum += row.bits * n;
          r->rows.push_back(std::move(row));
          job.report(static_cast<double>(i + 1) / ts.size());
        }
        r->avg_bits = r->values ? bit_sum / r->values : 0;
        return std::shared_ptr<const PlanResult>(r);
      });
    }
  }
}

void add_plan_rule(AppState& app, const std::string& pattern, const std::string& dtype) {
  ExportPlan p = app.plan;
  PlanRule r;
  r.pattern = pattern;
  r.dtype = dtype;
  try {
    if (dtype != "keep") r.target = DataType::parse(dtype);
  } catch (const Error& e) {
    app.note(std::string("rule not added: ") + e.what());
    return;
  }
  // New rules go first: the first match decides, and the newest intent should win.
  std::erase_if(p.rules, [&](const PlanRule& x) { return x.pattern == pattern && !x.axis_only; });
  p.rules.insert(p.rules.begin(), r);
  try {
    app.plan = parse_plan(plan_to_json(p), "plan");
  } catch (const Error& e) {
    app.note(std::string("rule not added: ") + e.what());
  }
}

void start_auto_assign(AppState& app) {
  if (!app.model) {
    app.note("auto-assign needs an open model");
    return;
  }
  auto model = app.model;
  AutoPlanOptions ao;
  ao.snr_target_db = app.snr_target;
  ao.cast = composer_cast_options(app);
  ao.include_1d = app.auto_include_1d;
  ao.include_embeddings = app.auto_include_embeddings;
  std::vector<std::string> cands;
  std::string cur;
  for (const char* c = app.auto_candidates;; ++c) {
    if (*c == ',' || *c == 0) {
      if (!cur.empty()) cands.push_back(cur);
      cur.clear();
      if (!*c) break;
    } else if (*c != ' ') {
      cur += *c;
    }
  }
  if (!cands.empty()) ao.candidates = cands;
  app.auto_job.start("auto-assign datatypes", [model, ao](JobControl& job) {
    auto r = std::make_shared<AutoAssignResult>();
    for (const AutoPlanPick& p : auto_assign(*model, ao, &job))
      r->picks.emplace_back(p.tensor, widgets::AutoPick{p.dtype, p.bits, p.snr_db, p.met});
    return std::shared_ptr<const AutoAssignResult>(r);
  });
}

void start_export(AppState& app) {
  if (!app.model) {
    app.export_error = "no model is open";
    return;
  }
  auto model = app.model;
  const ExportPlan plan = app.plan;
  ExportOptions eo;
  const Layout layouts[] = {Layout::Native, Layout::GptOss, Layout::CompressedTensors,
                            Layout::GGUF};
  eo.layout = layouts[std::clamp(app.export_layout, 0, 3)];
  eo.cast = composer_cast_options(app);
  const std::string out = app.export_path;
  app.export_error.clear();
  app.export_done.reset();
  app.export_job.start("export " + out, [model, plan, eo, out](JobControl& job) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = std::make_shared<ExportDone>();
    r->report = export_model(*model, out, plan, eo, &job);
    r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::shared_ptr<const ExportDone>(r);
  });
}

void start_gemm(AppState& app) {
  GemmOptions g;
  g.m = app.gemm_m;
  g.n = app.gemm_n;
  g.k = app.gemm_k;
  std::vector<GemmKind> kinds;
  const GemmKind all[] = {GemmKind::BF16, GemmKind::FP8, GemmKind::FP8Block, GemmKind::TCFP12,
                          GemmKind::TCFP16};
  for (int i = 0; i < 5; ++i)
    if (app.gemm_kinds[i]) kinds.push_back(all[i]);
  app.gemm_error.clear();
  app.gemm_job.start("GEMMs", [g, kinds](JobControl& job) {
    auto r = std::make_shared<GemmRun>();
    for (size_t i = 0; i < kinds.size(); ++i) {
      job.check();
      try {
        r->results.push_back(run_gemm(kinds[i], g, &job));
      } catch (const Cancelled&) {
        throw;
      } catch (const Error& e) {
        r->errors.push_back(std::string(to_string(kinds[i])) + ": " + e.what());
      }
      job.report(static_cast<double>(i + 1) / kinds.size());
    }
    return std::shared_ptr<const GemmRun>(r);
  });
}

bool save_text(AppState& app, const std::string& path, const std::string& text) {
  try {
    io::write_atomically(path, [&](const auto& put) { put(text.data(), text.size()); });
    app.note("saved " + path);
    return true;
  } catch (const std::exception& e) {
    app.note(e.what());
    return false;
  }
}

bool save_metrics(AppState& app, const std::string& path) {
  if (!app.analysis) {
    app.note("no metrics to save yet");
    return false;
  }
  const bool json = std::filesystem::path(path).extension() == ".json";
  const std::vector<const widgets::Analysis*> rows = {app.analysis.get()};
  return save_text(app, path, json ? widgets::metrics_json(rows) : widgets::metrics_csv(rows));
}

}  // namespace castscope::gui
