#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "app_state.hpp"
#include "demo_assets.hpp"

namespace castscope::gui {

const char* panel_name(PanelId p) {
  switch (p) {
    case PanelId::Files:
      return "files";
    case PanelId::Tensors:
      return "tensors";
    case PanelId::Composer:
      return "composer";
    case PanelId::Views:
      return "views";
    case PanelId::ScaleModes:
      return "scale-modes";
    case PanelId::Compare:
      return "compare";
    case PanelId::Plan:
      return "plan";
    case PanelId::Export:
      return "export";
    case PanelId::Matmul:
      return "matmul";
    case PanelId::Teach:
      return "teach";
    case PanelId::ModelMap:
      return "model-map";
    case PanelId::Activations:
      return "activations";
    case PanelId::Count:
      break;
  }
  return "?";
}

void open_source(AppState& app, const std::string& spec) {
  app.load_error.clear();
  app.selected.clear();
  app.loader.start("open " + spec, [spec](JobControl& job) {
    auto out = std::make_shared<Loaded>();
    std::string first;
    std::shared_ptr<const io::Model> m = open_any(spec, &first);
    job.check();
    out->model = m;
    out->tensor = first;
    if (!first.empty()) out->data = m->load(first);
    return std::shared_ptr<const Loaded>(out);
  });
}

static void lower_thread_priority() {
#if defined(__linux__)
  // Linux keeps a nice value per thread, inherited by the threads it creates.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
#endif
}

void select_tensor(AppState& app, const std::string& name) {
  if (!app.model || !app.model->find(name)) {
    app.note("no tensor '" + name + "' in the open model");
    return;
  }
  app.selected = name;
  // The file's model: a load started before the overrides change stays this file's.
  auto model = app.file_model;
  app.loader.start("load " + name, [model, name](JobControl& job) {
    auto out = std::make_shared<Loaded>();
    out->model = model;
    out->tensor = name;
    out->data = model->load(name);
    job.check();
    return std::shared_ptr<const Loaded>(out);
  });
}

bool set_dtype(AppState& app, const std::string& text) {
  if (!app.composer.set_text(text)) {
    app.note("datatype '" + text + "': " + app.composer.error);
    return false;
  }
  app.recompute = true;
  return true;
}

namespace {
// The axis-only rules as text: what the open model's layouts depend on.
std::string overrides_key(const ExportPlan& plan) {
  std::string k;
  for (size_t i = 0; i < plan.rules.size(); ++i) {
    const PlanRule& r = plan.rules[i];
    if (!r.axis_only) continue;
    // The rule's index is in the layout's reason.
    k += std::to_string(i) + "\x1f" + r.pattern + "\x1f" + (r.axis ? r.axis->str() : "") +
         (r.weights ? "\x1fw" : "") + "\x1f" + std::to_string(r.rank) + "\x1e";
  }
  return k;
}
}  // namespace

void sync_layout_overrides(AppState& app, bool new_file) {
  if (!app.file_model) return;
  const std::string key = overrides_key(app.plan);
  if (!new_file && key == app.layout_overrides) return;
  app.layout_overrides = key;
  std::shared_ptr<const io::Model> m = app.file_model;
  try {
    m = with_layout_overrides(app.file_model, app.plan);
  } catch (const Error& e) {
    app.note(std::string("layout overrides not applied: ") + e.what());
  }
  const std::shared_ptr<const io::Model> was = app.model;
  app.model = m;
  if (new_file || !was || was == m) return;
  // Only what depends on a changed layout is computed again.
  std::vector<std::string> changed;
  const auto& a = was->tensors();
  const auto& b = m->tensors();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i].layout.axis.str() != b[i].layout.axis.str() ||
        a[i].layout.guessed != b[i].layout.guessed || a[i].layout.layout != b[i].layout.layout)
      changed.push_back(b[i].name);
  if (changed.empty()) return;
  if (app.loaded && std::find(changed.begin(), changed.end(), app.loaded->tensor) != changed.end())
    app.recompute = true;
  redo_map_rows(app, changed);
}

void update_jobs(AppState& app) {
  sync_layout_overrides(app, false);
  std::shared_ptr<const Loaded> loaded;
  std::string err;
  if (app.loader.poll(&loaded, &err)) {
    if (!err.empty()) {
      app.load_error = err;
      app.note(err);
    } else if (loaded) {
      if (loaded->model != app.file_model) {
        app.file_model = loaded->model;
        app.model = loaded->model;
        app.model_path = loaded->model->path();
        sync_layout_overrides(app, true);
        // Only files that opened go on the recent list.
        if (app.model_path != "demo") remember_recent(app, app.model_path);
      }
      app.loaded = loaded;
      app.selected = loaded->tensor;
      app.recompute = true;
    }
  }
  std::shared_ptr<const widgets::Analysis> a;
  bool cancelled = false;
  if (app.analyzer.poll(&a, &err, &cancelled)) {
    if (!err.empty()) {
      app.analysis_error = err;
      app.note(err);
    } else if (a) {
      app.analysis = a;
      app.analysis_error.clear();
      ++app.analyses_done;
      app.analysis_frame = app.frame;
    }
    app.partial.reset();
  } else if (app.analyzer.running()) {
    std::lock_guard<std::mutex> lock(app.partial_slot->mu);
    if (app.partial_slot->a && app.partial_slot->a != app.partial) {
      app.partial = app.partial_slot->a;
      app.partial_frame = app.frame;
    }
  }
  // Live recompute: any change cancels the running analysis and starts a fresh one.
  if (app.recompute && app.loaded && app.loaded->data && !app.loader.running()) {
    app.recompute = false;
    auto input = app.loaded;
    const DataType d = app.composer.dtype;
    CastOptions o;
    o.round = app.composer.round;
    o.scale_mode = app.composer.scale_mode;
    o.overflow = app.composer.overflow;
    app.composer.axis.apply(o);
    // An automatic axis is the tensor's resolved layout (a plan's override included), as the
    // CLI and the model map take it.
    const io::Model* lm = input->model == app.file_model ? app.model.get() : input->model.get();
    if (lm)
      if (const io::TensorInfo* t = lm->find(input->tensor)) {
        try {
          o = io::cast_options_for(o, *t);
        } catch (const Error&) {
          // an axis out of range: the analysis reports it
        }
      }
    o.device = Device::Auto;
    o.rotate = Rotation{app.view_rotate, app.view_rotate > 0 && app.view_signs,
                        static_cast<uint64_t>(app.view_seed)};
    auto slot = app.partial_slot = std::make_shared<AppState::PartialSlot>();
    app.partial.reset();
    app.analyzer.start(
        "cast " + input->tensor + " to " + d.str(), [input, d, o, slot](JobControl& job) {
          // Below the frame's priority, with the threads it starts: on a machine of two cores the
          // views' passes would otherwise take the CPU from drawing.
          lower_thread_priority();
          widgets::AnalysisOptions ao;
          ao.on_metrics = [slot](const widgets::Analysis& part) {
            auto copy = std::make_shared<widgets::Analysis>();
            copy->tensor = part.tensor;
            copy->shape = part.shape;
            copy->dtype = part.dtype;
            copy->options = part.options;
            copy->stats = part.stats;
            copy->bits_per_value = part.bits_per_value;
            copy->axis = part.axis;
            copy->view = part.view;
            copy->absmax = part.absmax;
            std::lock_guard<std::mutex> lock(slot->mu);
            slot->a = std::move(copy);
          };
          return widgets::analyze(input->data, d, o, input->tensor, ao, &job, input->device.get());
        });
  }
  update_decision_jobs(app);
  update_budget_jobs(app);
  update_map_jobs(app);
  update_method_jobs(app);
}

}  // namespace castscope::gui
