#include "script.hpp"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "panels.hpp"
#include "castscope/json_path.hpp"
#include "castscope/metrics_json.hpp"

namespace castscope::gui {

namespace {

const char* const kCommands[] = {"open",          "tensor",
                                 "dtype",         "round",
                                 "scale-mode",    "overflow",
                                 "theme",         "panel",
                                 "hide",          "log-y",
                                 "log-x",         "wait",
                                 "frames",        "screenshot",
                                 "state",         "quit",
                                 "heat-field",    "timeout",
                                 "bad-dtype",     "save-view",
                                 "save-metrics",  "pin",
                                 "unpin-all",     "plan-rule",
                                 "plan-default",  "plan-auto",
                                 "plan-save",     "plan-load",
                                 "plan-reset",    "export",
                                 "teach-tile",    "matmul-run",
                                 "scale-select",  "snr-target",
                                 "map-dtypes",    "map-rotate",
                                 "map-metric",    "map-run",
                                 "map-assign",    "act-path",
                                 "act-synthetic", "act-dtypes",
                                 "act-rotate",    "act-run",
                                 "rotate",        "map-activations",
                                 "axis",          "plan-candidates",
                                 "plan-budget",   "budget-cands",
                                 "budget-act",    "budget-apply",
                                 "expect"};

bool known(const std::string& c) {
  for (const char* k : kCommands)
    if (c == k) return true;
  return ScriptInput::handles(c);
}

bool on_off(const std::string& a) {
  return a == "on" || a == "1" || a == "true" || a == "yes";
}

// "N [SEED]" of the rotate commands: the Hadamard block size N (0: none, else checked), random
// signs on and their seed set only when SEED is given.
void set_rotation(const std::string& arg, const char* cmd, int& block, bool& signs, int& seed) {
  std::istringstream a(arg);
  int n = 0, s = -1;
  a >> n >> s;
  validate_rotation(Rotation{n, false, 0}, cmd);
  block = n;
  signs = s >= 0;
  if (s >= 0) seed = s;
}

}  // namespace

Script::Script(const std::string& path) : path_(path) {
  std::ifstream f(path);
  if (!f) throw Error("cannot read script '" + path + "'");
  std::string text;
  int n = 0;
  while (std::getline(f, text)) {
    ++n;
    // A comment starts at a '#' outside quotes at the start of a line or after a space; "##"
    // begins a widget ID ("##preset"), not a comment.
    bool quoted = false;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '"') quoted = !quoted;
      if (text[i] == '#' && !quoted &&
          (i == 0 || std::isspace(static_cast<unsigned char>(text[i - 1]))) &&
          !(i + 1 < text.size() && text[i + 1] == '#')) {
        text.resize(i);
        break;
      }
    }
    std::istringstream ss(text);
    Line l;
    l.number = n;
    if (!(ss >> l.cmd)) continue;
    std::getline(ss >> std::ws, l.arg);
    while (!l.arg.empty() && std::isspace(static_cast<unsigned char>(l.arg.back())))
      l.arg.pop_back();
    if (!known(l.cmd))
      throw Error(path + ":" + std::to_string(n) + ": unknown command '" + l.cmd + "'");
    lines_.push_back(l);
  }
}

std::string Script::take_screenshot_path() {
  std::string p = shot_;
  shot_.clear();
  return p;
}

void Script::apply_input(ImGuiIO& io) {
  input_.apply(io);
  for (const std::string& e : input_.take_errors()) errors_.push_back(input_where_ + e);
}

void Script::step(AppState& app) {
  if (input_.busy()) return;
  if (frames_left_ > 0) {
    --frames_left_;
    return;
  }
  if (!shot_.empty()) {
    if (shot_wait_ > 0) --shot_wait_;
    return;
  }
  if (waiting_) {
    // A recompute waits for a loaded tensor: after a failed open there is none, and the wait
    // is over (the open's error is in load_error and the messages).
    const bool recompute_due = app.recompute && app.loaded && app.loaded->data;
    const bool idle = !app.busy() && !recompute_due && !app.pending && !plan_evaluate_running();
    if (!idle) {
      if (glfwGetTime() - wait_started_ > wait_limit_s_) {
        errors_.push_back("line wait: still busy after " +
                          std::to_string(static_cast<int>(wait_limit_s_)) + " s");
        app.loader.cancel();
        app.analyzer.cancel();
        waiting_ = false;
      }
      return;
    }
    waiting_ = false;
    frames_left_ = 2;  // let the panels lay out the new result before the next command
    return;
  }
  ran_other_ = false;  // a frame was drawn since the last call
  while (pc_ < lines_.size()) {
    const Line& l = lines_[pc_++];
    const std::string where = path_ + ":" + std::to_string(l.number) + ": ";
    auto fail = [&](const std::string& msg) {
      errors_.push_back(where + msg);
      app.note(where + msg);
    };
    try {
      if (ScriptInput::handles(l.cmd)) {
        // The mouse acts on what is on screen: a frame drawn after the last other command.
        if (ran_other_) {
          --pc_;
          ran_other_ = false;
          frames_left_ = 1;
          return;
        }
        input_where_ = where;
        if (input_.start(l.cmd, l.arg) == ScriptInput::Next::Retry) --pc_;
        if (input_.busy()) return;
        continue;
      }
      ran_other_ = true;
      if (l.cmd == "open") {
        open_source(app, l.arg.empty() ? "demo" : l.arg);
      } else if ((l.cmd == "tensor" || l.cmd == "plan-auto" || l.cmd == "export" ||
                  l.cmd == "map-run" || l.cmd == "act-run") &&
                 app.loader.running()) {
        --pc_;  // these act on the open model, which is still opening: retry next frame
        return;
      } else if (l.cmd == "tensor") {
        select_tensor(app, l.arg);
      } else if (l.cmd == "dtype") {
        if (!set_dtype(app, l.arg)) fail("invalid datatype: " + app.composer.error);
      } else if (l.cmd == "bad-dtype") {
        // Types a string that must be rejected; the previous datatype stays in force.
        const DataType before = app.composer.dtype;
        if (app.composer.set_text(l.arg)) {
          fail("datatype '" + l.arg + "' was accepted");
        } else if (!(app.composer.dtype == before)) {
          fail("a rejected datatype replaced the current one");
        } else {
          std::snprintf(app.composer.text, sizeof app.composer.text, "%s", l.arg.c_str());
        }
      } else if (l.cmd == "save-view") {
        // save-view PANEL FILE.png: that panel's pixels after the next frame.
        const size_t sp = l.arg.find(' ');
        const std::string name = l.arg.substr(0, sp),
                          file = sp == std::string::npos ? "" : l.arg.substr(sp + 1);
        int found = -1;
        for (int i = 0; i < static_cast<int>(PanelId::Count); ++i)
          if (name == panel_name(static_cast<PanelId>(i))) found = i;
        if (found < 0 || file.empty()) {
          fail("save-view needs a panel name and a file");
        } else {
          app.view_shot_panel = found;
          app.view_shot_path = file;
          frames_left_ = 1;
          return;
        }
      } else if (l.cmd == "save-metrics") {
        if (!save_metrics(app, l.arg)) fail("could not save metrics to '" + l.arg + "'");
      } else if (l.cmd == "pin") {
        DataType::parse(l.arg);  // reject bad strings here, with the grammar's message
        app.pinned.push_back(l.arg);
      } else if (l.cmd == "unpin-all") {
        app.pinned.clear();
      } else if (l.cmd == "plan-rule") {
        const size_t sp = l.arg.rfind(' ');
        if (sp == std::string::npos)
          fail("plan-rule PATTERN DTYPE");
        else
          add_plan_rule(app, l.arg.substr(0, sp), l.arg.substr(sp + 1));
      } else if (l.cmd == "plan-default") {
        ExportPlan p = app.plan;
        p.default_text = l.arg;
        p.default_dtype.reset();
        if (l.arg != "keep") p.default_dtype = DataType::parse(l.arg);
        app.plan = parse_plan(plan_to_json(p), "plan");
      } else if (l.cmd == "plan-auto") {
        if (!l.arg.empty()) app.snr_target = std::stof(l.arg);
        start_auto_assign(app);
      } else if (l.cmd == "snr-target") {
        app.snr_target = std::stof(l.arg);
      } else if (l.cmd == "plan-budget") {
        app.plan_budget = std::stod(l.arg);
        if (!app.budget_table && !app.budget_job.running()) start_budget_table(app);
      } else if (l.cmd == "budget-cands") {
        std::snprintf(app.budget_candidates, sizeof app.budget_candidates, "%s", l.arg.c_str());
        app.budget_table.reset();
      } else if (l.cmd == "budget-act") {
        app.budget_activations = l.arg == "on";
        app.budget_table.reset();
      } else if (l.cmd == "budget-apply") {
        apply_budget_plan(app);
      } else if (l.cmd == "plan-candidates") {
        std::snprintf(app.auto_candidates, sizeof app.auto_candidates, "%s", l.arg.c_str());
      } else if (l.cmd == "axis") {
        app.composer.axis = AxisSpec::parse(l.arg);
        app.recompute = true;
      } else if (l.cmd == "plan-save") {
        save_plan(l.arg, app.plan);
      } else if (l.cmd == "plan-load") {
        app.plan = load_plan(l.arg);
      } else if (l.cmd == "plan-reset") {
        app.plan = ExportPlan{};
      } else if (l.cmd == "export") {
        // export LAYOUT PATH
        const size_t sp = l.arg.find(' ');
        if (sp == std::string::npos) {
          fail("export LAYOUT PATH");
        } else {
          const Layout lay = parse_layout(l.arg.substr(0, sp));
          const Layout all[] = {Layout::Native, Layout::GptOss, Layout::CompressedTensors,
                                Layout::GGUF};
          for (int i = 0; i < 4; ++i)
            if (all[i] == lay) app.export_layout = i;
          std::snprintf(app.export_path, sizeof app.export_path, "%s",
                        l.arg.substr(sp + 1).c_str());
          app.show[static_cast<int>(PanelId::Export)] = true;
          start_export(app);
        }
      } else if (l.cmd == "rotate") {
        // rotate N [SEED]: the views' rotation (0: none), random signs when SEED is given.
        set_rotation(l.arg, "rotate", app.view_rotate, app.view_signs, app.view_seed);
        app.recompute = true;
      } else if (l.cmd == "map-dtypes") {
        std::snprintf(app.map_dtypes, sizeof app.map_dtypes, "%s", l.arg.c_str());
      } else if (l.cmd == "map-rotate") {
        // map-rotate N [SEED]: block size (0: none), random signs from SEED when given.
        set_rotation(l.arg, "map-rotate", app.map_rotate, app.map_signs, app.map_seed);
      } else if (l.cmd == "map-activations") {
        app.map_activations = on_off(l.arg);
      } else if (l.cmd == "map-metric") {
        app.map_metric = static_cast<int>(parse_map_metric(l.arg));
      } else if (l.cmd == "map-run") {
        app.show[static_cast<int>(PanelId::ModelMap)] = true;
        start_model_map(app);
        if (!app.map_error.empty()) fail(app.map_error);
      } else if (l.cmd == "map-assign") {
        // map-assign ROW COL: what a click on that cell does.
        std::istringstream a(l.arg);
        size_t r = 0, c = 0;
        if (!(a >> r >> c) || !app.model_map || r >= app.model_map->rows.size() ||
            c >= app.model_map->columns.size())
          fail("map-assign ROW COL needs a finished map and a cell inside it");
        else
          assign_from_map(app, r, c);
      } else if (l.cmd == "act-path") {
        std::snprintf(app.act_path, sizeof app.act_path, "%s", l.arg.c_str());
      } else if (l.cmd == "act-synthetic") {
        // act-synthetic TOKENS OUTLIERS SCALE
        app.act_path[0] = 0;
        std::istringstream a(l.arg);
        a >> app.act_tokens >> app.act_outliers >> app.act_outlier_scale;
      } else if (l.cmd == "act-dtypes") {
        std::istringstream a(l.arg);
        std::string x, w;
        a >> x >> w;
        std::snprintf(app.act_dtype, sizeof app.act_dtype, "%s", x.c_str());
        std::snprintf(app.act_weight_dtype, sizeof app.act_weight_dtype, "%s", w.c_str());
      } else if (l.cmd == "act-rotate") {
        app.act_rotate = std::stoi(l.arg);
      } else if (l.cmd == "act-run") {
        app.show[static_cast<int>(PanelId::Activations)] = true;
        start_activations(app);
        if (!app.act_error.empty()) fail(app.act_error);
      } else if (l.cmd == "teach-tile") {
        app.teach_tile = std::stoi(l.arg);
      } else if (l.cmd == "matmul-run") {
        start_gemm(app);
      } else if (l.cmd == "scale-select") {
        const ScaleMode m = parse_scale_mode(l.arg);
        app.scale_mode_sel = static_cast<int>(m);
      } else if (l.cmd == "round") {
        app.composer.round = parse_round(l.arg);
        app.recompute = true;
      } else if (l.cmd == "scale-mode") {
        app.composer.scale_mode = parse_scale_mode(l.arg);
        app.recompute = true;
      } else if (l.cmd == "overflow") {
        app.composer.overflow = parse_overflow(l.arg);
        app.recompute = true;
      } else if (l.cmd == "theme") {
        if (l.arg != "dark" && l.arg != "light")
          fail("theme is dark or light");
        else
          set_theme(app, l.arg == "dark");
      } else if (l.cmd == "panel" || l.cmd == "hide") {
        int found = -1;
        for (int i = 0; i < static_cast<int>(PanelId::Count); ++i)
          if (l.arg == panel_name(static_cast<PanelId>(i))) found = i;
        if (found < 0) {
          fail("unknown panel '" + l.arg + "'");
        } else if (l.cmd == "panel") {
          app.show[found] = true;
          app.focus_panel = found;
        } else {
          app.show[found] = false;
        }
      } else if (l.cmd == "log-y") {
        app.hist_log_y = on_off(l.arg);
      } else if (l.cmd == "log-x") {
        app.hist_log_x = on_off(l.arg);
      } else if (l.cmd == "heat-field") {
        if (l.arg == "scale")
          app.heat.field = widgets::HeatField::ScaleLog2;
        else if (l.arg == "absmax")
          app.heat.field = widgets::HeatField::Absmax;
        else if (l.arg == "snr")
          app.heat.field = widgets::HeatField::Snr;
        else if (l.arg == "mapping")
          app.heat.field = widgets::HeatField::Mapping;
        else
          fail("heat-field is scale, absmax, snr or mapping");
      } else if (l.cmd == "timeout") {
        wait_limit_s_ = std::stod(l.arg);
      } else if (l.cmd == "wait") {
        waiting_ = true;
        wait_started_ = glfwGetTime();
        return;
      } else if (l.cmd == "frames") {
        frames_left_ = std::max(0, std::stoi(l.arg));
        return;
      } else if (l.cmd == "screenshot") {
        if (l.arg.empty()) {
          fail("screenshot needs a file name");
        } else {
          shot_ = l.arg;
          shot_wait_ = 1;  // capture after one more full frame
          return;
        }
      } else if (l.cmd == "expect") {
        // expect PATH=VALUE or PATH~TEXT (contains): the state as it is now, mid-session.
        const size_t op = l.arg.find_first_of("=~");
        if (op == std::string::npos) throw Error("expect PATH=VALUE or PATH~TEXT");
        const nlohmann::json state = nlohmann::json::parse(state_json(app, errors_));
        const nlohmann::json* v = json_at(state, l.arg.substr(0, op));
        const std::string want = l.arg.substr(op + 1);
        const std::string got = !v               ? "(absent)"
                                : v->is_string() ? v->get<std::string>()
                                                 : v->dump();
        if (l.arg[op] == '=' ? got != want : got.find(want) == std::string::npos)
          fail(l.arg.substr(0, op) + " is '" + got + "', expected " +
               (l.arg[op] == '=' ? "'" : "to contain '") + want + "'");
      } else if (l.cmd == "state") {
        const std::string text = state_json(app, errors_);
        io::write_atomically(l.arg, [&](const auto& put) { put(text.data(), text.size()); });
      } else if (l.cmd == "quit") {
        app.quit = true;
        return;
      }
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
}

std::string state_json(const AppState& app, const std::vector<std::string>& script_errors) {
  nlohmann::json j;
  j["model"] = app.model ? app.model_path : "";
  j["model_format"] = app.model ? app.model->format() : "";
  j["tensor_count"] = app.model ? app.model->tensors().size() : 0;
  j["tensor"] = app.loaded ? app.loaded->tensor : "";
  j["dtype"] = app.composer.dtype.str();
  j["dtype_name"] = app.composer.dtype.name();
  j["composer_error"] = app.composer.error;
  j["composer_text"] = app.composer.text;
  j["round"] = to_string(app.composer.round);
  j["axis"] = app.composer.axis.str();
  j["scale_mode"] = to_string(app.composer.scale_mode);
  j["overflow"] = to_string(app.composer.overflow);
  j["theme"] = app.dark ? "dark" : "light";
  j["log_y"] = app.hist_log_y;
  j["log_x"] = app.hist_log_x;
  j["heat"] = {{"zoom", app.heat.view.zx},
               {"zoom_y", app.heat.view.zy},
               {"u0", app.heat.view.u0},
               {"v0", app.heat.view.v0}};
  j["busy"] = app.busy();
  j["frames"] = app.frame;
  j["fps"] = app.fps;
  {
    // Frames drawn while an analysis ran, and whether its metrics arrived before the rest.
    const AppState::BusyFrames& b = app.busy_frames;
    std::vector<float> ms = b.ms;
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double q) {
      return ms.empty() ? 0.0 : static_cast<double>(ms[static_cast<size_t>(q * (ms.size() - 1))]);
    };
    j["frames_while_analysing"] = {{"frames", b.frames},
                                   {"max_ms", b.max_ms},
                                   {"mean_ms", b.frames ? b.sum_ms / b.frames : 0.0},
                                   {"p50_ms", pct(0.5)},
                                   {"p95_ms", pct(0.95)}};
    j["metrics_first"] = {{"partial_frame", app.partial_frame},
                          {"analysis_frame", app.analysis_frame}};
  }
  j["first_frame"] = {{"ms", app.first_frame.ms},
                      {"gpu_starting", app.first_frame.gpu_starting},
                      {"gpu_running", app.first_frame.gpu_running}};
  j["analyses"] = app.analyses_done;
  nlohmann::json panels = nlohmann::json::object();
  for (int i = 0; i < static_cast<int>(PanelId::Count); ++i)
    panels[panel_name(static_cast<PanelId>(i))] = app.show[i];
  j["panels"] = panels;
  if (const widgets::Analysis* a = app.analysis.get()) {
    nlohmann::json r;
    widgets::put_analysis_cast(r, *a);
    r["rotate"] = a->options.rotate.str();
    r["backend"] = a->backend;
    r["views_on_device"] = a->on_device;
    metrics_json::put_snr(r, "snr_db", a->stats.snr_db);
    r["mse"] = a->stats.mse;
    r["max_abs_err"] = a->stats.max_abs_err;
    r["clipped"] = a->stats.clipped;
    r["clipped_pct"] = a->stats.clipped_pct();
    r["nonfinite_in"] = a->stats.nonfinite_in;
    r["count"] = a->stats.count;
    r["bits_per_value"] = a->bits_per_value;
    r["nominal_bits"] = a->nominal_bits;
    r["row_length"] = a->row_length;
    r["axis"] = a->axis;
    r["view"] = {a->view.rows, a->view.cols};
    uint64_t vo = 0, vc = 0;
    for (uint64_t c : a->value_orig.counts) vo += c;
    for (uint64_t c : a->value_cast.counts) vc += c;
    r["value_hist_total"] = {vo, vc};
    r["exp_range"] = {a->exp_lo, a->exp_hi};
    r["representable_log2"] = {a->rep_lo, a->rep_hi};
    r["tiles"] = a->tiles ? nlohmann::json{a->tiles->rows, a->tiles->cols} : nlohmann::json();
    r["tiles_note"] = a->tiles_note;
    if (a->tiles && !a->tiles->mapping.empty()) {
      std::vector<int16_t> used = a->tiles->mapping;
      std::sort(used.begin(), used.end());
      r["tile_mappings"] = std::unique(used.begin(), used.end()) - used.begin();
    }
    int64_t tile_clipped = 0;
    for (int64_t c : a->tile_clipped) tile_clipped += c;
    r["tile_clipped_total"] =
        a->tile_clipped.empty() ? nlohmann::json() : nlohmann::json(tile_clipped);
    r["mask_set"] = a->mask.set;
    r["mask_what"] = a->mask.what;
    j["analysis"] = r;
  } else {
    j["analysis"] = nullptr;
  }
  j["analysis_error"] = app.analysis_error;
  j["pinned"] = app.pinned;
  if (const CompareResult* c = app.compare.get()) {
    nlohmann::json rows = nlohmann::json::array();
    std::vector<widgets::TradeoffPoint> pts;
    for (const auto& a : c->rows) {
      nlohmann::json row = {{"dtype", a->dtype.str()}, {"bits", a->bits_per_value}};
      metrics_json::put_snr(row, "snr_db", a->stats.snr_db);
      rows.push_back(row);
      pts.push_back({a->bits_per_value, a->stats.snr_db});
    }
    j["compare"] = {{"rows", rows}, {"pareto", widgets::pareto_front(pts)}, {"errors", c->errors}};
  }
  if (const ScaleModeResult* sm = app.scale_modes.get()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : sm->runs) {
      nlohmann::json row = {{"mode", to_string(r.mode)}};
      metrics_json::put_snr(row, "snr_db", r.analysis->stats.snr_db);
      row["clipped_pct"] = r.analysis->stats.clipped_pct();
      row["tiles_differ"] = r.tiles_differ;
      rows.push_back(row);
    }
    j["scale_modes"] = rows;
    j["scale_mode_selected"] = to_string(static_cast<ScaleMode>(app.scale_mode_sel));
  }
  j["plan"] = nlohmann::json::parse(plan_to_json(app.plan), nullptr, false);
  j["plan_evaluate"] = nlohmann::json::parse(plan_evaluate_state_json(), nullptr, false);
  j["method"] = nlohmann::json::parse(method_state_json(app), nullptr, false);
  if (const PlanResult* p = app.plan_eval.get()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const PlanRow& r : p->rows) {
      nlohmann::json row = {{"name", r.name},
                            {"dtype", r.dtype},
                            {"axis", r.axis},
                            {"layout_guessed", r.layout_guessed},
                            {"bits", r.bits}};
      metrics_json::put_snr(row, "snr_db", r.snr_db);
      row["bytes_out"] = r.bytes_out;
      row["error"] = r.error;
      rows.push_back(row);
    }
    j["plan_eval"] = {{"rows", rows},
                      {"bytes_in", p->bytes_in},
                      {"bytes_out", p->bytes_out},
                      {"avg_bits", p->avg_bits}};
  }
  if (const AutoAssignResult* au = app.auto_result.get()) {
    nlohmann::json picks = nlohmann::json::object();
    for (const auto& [name, pick] : au->picks) {
      picks[name] = {{"dtype", pick.dtype}, {"bits", pick.bits}};
      metrics_json::put_snr(picks[name], "snr_db", pick.snr_db);
      picks[name]["met"] = pick.met;
    }
    j["auto_assign"] = picks;
  }
  j["snr_target"] = app.snr_target;
  if (const BudgetTable* bt = app.budget_table.get()) {
    const double v = static_cast<double>(std::max<int64_t>(bt->table.values, 1));
    nlohmann::json b = {{"curve_points", bt->curve.size()},
                        {"tensors", bt->table.tensors.size()},
                        {"min_bpw", static_cast<double>(bt->min_bits) / v},
                        {"budget_bpw", app.plan_budget}};
    if (const BudgetPick* p = app.budget_pick.get())
      b["pick"] = {{"feasible", p->choice.feasible},
                   {"within", p->choice.bits <= p->choice.budget_bits},
                   {"bpw", static_cast<double>(p->choice.bits) / v},
                   {"budget_bpw", p->budget_bpw},
                   {"error", p->choice.error}};
    j["budget_planner"] = b;
  }
  j["export_error"] = app.export_error;
  if (const ExportDone* d = app.export_done.get())
    j["export"] = {{"files", d->report.files},
                   {"tensors", d->report.tensors.size()},
                   {"bytes_in", d->report.bytes_in},
                   {"bytes_out", d->report.bytes_out}};
  std::string why;
  const bool gemm_ok = gemm_available(&why);
  j["gemm"] = {{"available", gemm_ok},
               {"reason", why},
               {"results", app.gemm ? app.gemm->results.size() : 0},
               {"error", app.gemm_error}};
  if (const ModelMap* m = app.model_map.get()) {
    nlohmann::json rows = nlohmann::json::array();
    const MapMetric metric = static_cast<MapMetric>(app.map_metric);
    for (const MapRow& r : m->rows) {
      // The metric per column; SNR metrics add the parallel exact flags.
      const bool snr = metric == MapMetric::SNR || metric == MapMetric::OutputSNR;
      nlohmann::json v = nlohmann::json::array(), exact = nlohmann::json::array();
      nlohmann::json bits = nlohmann::json::array();
      for (size_t k = 0; k < r.cells.size(); ++k) {
        const double x = cell_value(r.cells[k], metric);
        v.push_back(metrics_json::number<nlohmann::json>(x));
        exact.push_back(snr && std::isinf(x) && x > 0);
        bits.push_back(metrics_json::number<nlohmann::json>(map_cell_bits(app, r, k)));
      }
      const auto d =
          app.plan.dtype_for({r.name, r.stored_dtype, r.shape, r.stored_bytes, "", r.layout});
      rows.push_back({{"name", r.name},
                      {"layer", r.group},
                      {"axis", r.axis},
                      {"layout", r.layout.layout},
                      {"layout_guessed", r.layout.guessed},
                      {"values", v},
                      {metrics_json::exact_key("values"), exact},
                      {"bits", bits},
                      {"plan", d ? d->str() : std::string("keep")}});
    }
    const MapTotals t = plan_totals_over_map(app);
    j["model_map"] = {{"columns", m->columns},         {"metric", to_string(metric)},
                      {"rotate", m->rotate.str()},     {"rows", rows},
                      {"values", m->values},           {"plan_bits", t.bits},
                      {"plan_avg_bits", t.avg_bits()}, {"stored_bits", t.stored_bits},
                      {"seconds", m->seconds}};
  }
  j["map_error"] = app.map_error;
  j["map_hover"] = app.map_hover;
  if (const LinearError* e = app.act_result.get()) {
    nlohmann::json act = {
        {"weight", app.act_weight}, {"tokens", e->tokens}, {"in", e->in}, {"out", e->out}};
    metrics_json::put_snr(act, "snr_db", e->snr_db);
    act["rel_err"] = e->rel_err;
    metrics_json::put_snr(act, "act_snr_db", e->act_snr_db);
    metrics_json::put_snr(act, "weight_snr_db", e->weight_snr_db);
    act["channels"] = e->channel_rel_err.size();
    act["product"] = e->product;
    act["tensor_cores"] = e->tensor_cores;
    act["gemm_ms"] = e->gemm_ms;
    j["activations"] = act;
  }
  j["act_error"] = app.act_error;
  j["teach_tile"] = app.teach_tile;
  if (app.teach_shown.tile >= 0) {
    const AppState::TeachShown& t = app.teach_shown;
    j["teach"] = {{"tile", t.tile},
                  {"scale", t.scale},
                  {"tensor_scale", t.tensor_scale},
                  {"grid", t.grid},
                  {"xs", t.xs},
                  {"qs", t.qs},
                  {"clipped", t.clipped},
                  {"tile_clipped", t.tile_clipped}};
    if (t.moved >= 0)
      j["teach"]["method"] = {{"elements", t.elements},
                              {"qs", t.method_q},
                              {"nearest_qs", t.nearest_q},
                              {"moved", t.moved},
                              {"moved_total", t.moved_total}};
  }
  // The teaching view's block of cast values (its tile's rows x columns), once it drew.
  j["teach_block"] = app.teach_block ? nlohmann::json(app.teach_block.shape()) : nlohmann::json();
  // The views' zoom, pan and what the mouse is over, for tests that operate them.
  {
    const widgets::HeatmapState& h = app.heat;
    // The tile grid [rows, cols]: with "screen" it places any tile for a click at view
    // coordinates (at zoom 1 tile (r, c) spans x + w * c / cols .. and y + h * r / rows ..).
    const widgets::Analysis* an = app.analysis.get();
    const nlohmann::json a_tiles =
        an && an->tiles ? nlohmann::json{an->tiles->rows, an->tiles->cols} : nlohmann::json();
    nlohmann::json hists = nlohmann::json::array();
    for (const widgets::AxisView& v : app.hist_view)
      hists.push_back({{"range", {v.lo, v.hi}},
                       {"full", {v.full_lo, v.full_hi}},
                       {"zoomed", v.zoomed()},
                       {"screen", v.screen}});
    j["views"] = {
        {"tile_map",
         {{"zoom", {h.view.zx, h.view.zy}},
          {"pan", {h.view.u0, h.view.v0}},
          {"hovered_tile", h.hovered},
          {"hover_element", {h.hover_row, h.hover_col}},
          {"clicked_tile", h.clicked},
          {"screen", h.screen},
          {"grid", a_tiles}}},
        {"mask",
         {{"drawn", app.mask.drawn},
          {"grid", an ? nlohmann::json{an->mask.out_rows, an->mask.out_cols} : nlohmann::json()},
          {"elements", an ? nlohmann::json{an->mask.rows, an->mask.cols} : nlohmann::json()},
          {"zoom", {app.mask.view.zx, app.mask.view.zy}},
          {"pan", {app.mask.view.u0, app.mask.view.v0}},
          {"hover_cell", {app.mask.hover_row, app.mask.hover_col}},
          {"screen", app.mask.screen}}},
        {"histograms", hists}};
  }
  j["load_error"] = app.load_error;
  j["messages"] = std::vector<std::string>(app.messages.begin(), app.messages.end());
  j["script_errors"] = script_errors;
  return j.dump(2) + "\n";
}

}  // namespace castscope::gui
