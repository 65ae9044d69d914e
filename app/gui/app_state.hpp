// Everything the desktop app knows, in one plain struct that panels read and edit. Heavy data
// (the loaded tensor, analyses) is held through shared pointers to immutable objects that the
// background jobs publish.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/matmul.hpp"
#include "castscope/planner.hpp"
#include "castscope/widgets/decisions.hpp"
#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/composer.hpp"
#include "castscope/widgets/heatmap.hpp"
#include "castscope/widgets/plot_math.hpp"
#include "castscope/widgets/mask_view.hpp"
#include "jobs.hpp"
#include "method_run.hpp"

namespace castscope::gui {

struct AppOptions {
  std::string file;    // opened at start ("" : the embedded demo)
  std::string script;  // --script FILE
  std::string state;   // --state FILE: JSON state written on quit (scripted sessions)
  std::string dtype = "mxfp4e2";
  std::string theme = "dark";
  bool headless = false;
  int width = 1600, height = 1000;
  float ui_scale = 0;  // --ui-scale; 0: the monitor's content scale
  // When main() began: the first frame's time is counted from here.
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// What the loader job publishes: the model (shared with earlier loads of the same file) and one
// tensor converted to float32.
struct Loaded {
  std::shared_ptr<const io::Model> model;
  std::string tensor;
  Tensor data;
  // data's copy on the GPU, shared by every analysis of this tensor (made on first use).
  std::shared_ptr<widgets::DeviceInput> device = std::make_shared<widgets::DeviceInput>();
};

enum class PanelId {
  Files,
  Tensors,
  Composer,
  Views,
  ScaleModes,
  Compare,
  Plan,
  Export,
  Matmul,
  Teach,
  ModelMap,
  Activations,
  Count
};

struct ScaleModeResult {
  std::string key;  // inputs it was computed for
  std::vector<widgets::ScaleModeRun> runs;
};
struct CompareResult {
  std::string key;
  std::vector<std::shared_ptr<const widgets::Analysis>> rows;
  std::vector<std::string> errors;  // pinned datatypes that do not apply to this tensor
};
struct PlanRow {
  std::string name;
  Shape shape;
  std::string dtype;            // datatype string, or "keep"
  std::string axis;             // the axis in use (describe_axis) for a cast tensor
  bool layout_guessed = false;  // cast along a layout nothing in the file showed
  double bits = 0, snr_db = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::string error;
};
struct PlanResult {
  std::string key;
  std::vector<PlanRow> rows;
  uint64_t bytes_in = 0, bytes_out = 0, values = 0;
  double avg_bits = 0;
};
struct AutoAssignResult {
  std::vector<std::pair<std::string, widgets::AutoPick>> picks;
};
// The budget planner's table and curve for one model and set of inputs (actions_budget.cpp).
struct BudgetTable {
  std::string key;
  PlanTable table;
  std::vector<ParetoPoint> curve;
  uint64_t min_bits = 0, max_bits = 0;  // the curve's range: smallest plan, least-error plan
};
// The exact plan for one budget.
struct BudgetPick {
  std::string key;
  double budget_bpw = 0;
  BudgetChoice choice;
  ExportPlan plan;  // with the budget recorded; empty rules when the budget has no plan
};
struct GemmRun {
  std::vector<GemmResult> results;
  std::vector<std::string> errors;
};
struct ExportDone {
  ExportReport report;
  double seconds = 0;
};
const char* panel_name(PanelId p);

struct AppState {
  AppOptions opt;

  // Model and tensor. `model` is `file_model` (the model as the file gives it) with the plan's
  // axis-only rules as its tensors' layouts (sync_layout_overrides), so every panel reads an
  // override as the tensor's layout; `layout_overrides` names the rules it was made with.
  std::shared_ptr<const io::Model> model, file_model;
  std::string layout_overrides;
  std::string model_path;
  std::shared_ptr<const Loaded> loaded;
  std::string selected;  // tensor chosen in the browser (may still be loading)
  std::string load_error;
  Job<Loaded> loader;

  // Datatype and results.
  widgets::ComposerState composer;
  std::shared_ptr<const widgets::Analysis> analysis;
  std::string analysis_error;
  Job<widgets::Analysis> analyzer;
  bool recompute = true;  // something changed: start a new analysis when the input is ready
  uint64_t analyses_done = 0;
  // Metrics first: the running analysis hands its statistics over (AnalysisOptions::on_metrics)
  // before its histograms, tile map and mask; the Views panel shows them while the rest follows.
  struct PartialSlot {
    std::mutex mu;
    std::shared_ptr<const widgets::Analysis> a;
  };
  std::shared_ptr<PartialSlot> partial_slot = std::make_shared<PartialSlot>();
  std::shared_ptr<const widgets::Analysis> partial;  // of the running analysis, else null
  uint64_t partial_frame = 0, analysis_frame = 0;    // frames at which each last arrived
  // The first frame: ms from main() to its swap, and the GPU context's state then (the frame
  // must not wait for a context still starting).
  struct FirstFrame {
    double ms = 0;
    bool gpu_starting = false, gpu_running = false;
  } first_frame;
  // Frame times drawn while an analysis ran: the app stays responsive during a job.
  struct BusyFrames {
    uint64_t frames = 0;
    double max_ms = 0, sum_ms = 0;
    std::vector<float> ms;  // the last 4096
  } busy_frames;

  // UI.
  bool dark = true;
  float dpi_scale = 1.0f;
  // analyses_done when the composer's current error appeared (-1: none): a later analysis
  // resets the box and clears the error.
  int64_t composer_error_since = -1;
  bool show[static_cast<int>(PanelId::Count)] = {true, true, true, true};
  ImVec4 panel_rect[static_cast<int>(PanelId::Count)] = {};  // x, y, w, h of the last frame
  // A pending "save view as PNG": panel and file, taken after the next frame.
  int view_shot_panel = -1;
  std::string view_shot_path;
  ImVec4 view_shot_rect = {};                    // a part of the panel only (one view), when w > 0
  std::map<std::string, ImVec4> view_cell_rect;  // each view's cell in the Views panel, by id
  bool pending = false;  // a visible panel waits for input before it can start its job
  std::string started_scale, started_compare, started_plan;  // inputs of the last started jobs

  // Scale-mode comparison.
  Job<ScaleModeResult> scale_job;
  std::shared_ptr<const ScaleModeResult> scale_modes;
  int scale_mode_sel = 2;
  widgets::HeatmapState scale_heat;

  // Datatype comparison.
  std::vector<std::string> pinned;
  Job<CompareResult> compare_job;
  std::shared_ptr<const CompareResult> compare;

  // Per-layer plan.
  ExportPlan plan;
  char plan_pattern[256] = "*";
  char plan_dtype[128] = "mxfp4e2";
  // The rule editor's row for a new rule (panel_plan_rules.cpp): pattern, datatype ("keep",
  // "axis only" or a datatype), axis ("" : none) and the weights-only box.
  char rule_new_pattern[256] = "";
  std::string rule_new_dtype = "keep", rule_new_axis;
  bool rule_new_weights = false;
  float snr_target = 20.0f;
  // Auto-assign: candidate datatypes, comma-separated ("" = the engine's default set), and
  // whether it may change 1-D tensors and embeddings.
  char auto_candidates[512] = "";
  bool auto_include_1d = false, auto_include_embeddings = false;
  char plan_path[512] = "plan.json";
  Job<PlanResult> plan_job;
  std::shared_ptr<const PlanResult> plan_eval;
  Job<AutoAssignResult> auto_job;
  std::shared_ptr<const AutoAssignResult> auto_result;
  // Budget planner (actions_budget.cpp, panel_plan_budget.cpp): candidates ("" = the planner's
  // default set), synthetic activations or weight error, the budget in bits per weight.
  char budget_candidates[512] = "";
  bool budget_activations = false;
  double plan_budget = 4.5;
  Job<BudgetTable> budget_job;
  std::shared_ptr<const BudgetTable> budget_table;
  std::string budget_error, started_pick;
  Job<BudgetPick> pick_job;
  std::shared_ptr<const BudgetPick> budget_pick;

  // Export.
  int export_layout = 0;
  char export_path[512] = "castscope-export.safetensors";
  Job<ExportDone> export_job;
  std::shared_ptr<const ExportDone> export_done;
  std::string export_error;

  // Matmul.
  int gemm_m = 4096, gemm_n = 4096, gemm_k = 4096;
  bool gemm_kinds[5] = {true, true, false, true, true};
  Job<GemmRun> gemm_job;
  std::shared_ptr<const GemmRun> gemm;
  std::string gemm_error;

  // Rotation of the views' cast (composer panel): Hadamard block size (0: none), signs, seed.
  int view_rotate = 0;
  bool view_signs = true;
  int view_seed = 1;

  // Model map (actions_map.cpp).
  char map_dtypes[256] = "mxfp4e2 nvfp4 mxfp6e2 mxfp8e4 mx6 int8_sc";
  int map_metric = 0;            // MapMetric
  bool map_activations = false;  // also the output SNR, with the activations panel's inputs
  int map_rotate = 0;            // Hadamard block size, 0: none
  bool map_signs = true;
  int map_seed = 1;
  Job<ModelMap> map_job;
  // The last sweep's settings (start_model_map), which rows whose layout an override changed are
  // swept again with; the rows the running job sweeps again (empty: a whole sweep).
  struct MapRequest {
    MapOptions o;
    bool with_act = false;
    std::string act_path;
    int64_t tokens = 0;
    int outliers = 0, seed = 0;
    double scale = 0;
    std::weak_ptr<const io::Model> file;  // the file swept (rows of another file are not redone)
  } map_request;
  std::vector<std::string> map_redo;
  std::shared_ptr<const ModelMap> model_map;
  std::string map_error;
  std::string map_hover;  // "tensor | datatype: value" of the hovered cell (state and tests)

  // Activations (actions_map.cpp).
  char act_path[512] = "";  // .npy / .safetensors; empty: synthetic
  int act_tokens = 64, act_outliers = 8, act_seed = 1;
  float act_outlier_scale = 20.0f;
  char act_dtype[128] = "nvfp4";
  char act_weight_dtype[128] = "nvfp4";
  int act_rotate = 0;
  Job<LinearError> act_job;
  std::shared_ptr<const LinearError> act_result;
  std::string act_error, act_weight;               // weight tensor the result is for
  widgets::AxisView act_hist_view, act_chan_view;  // x zoom of its error and per-channel plots

  // Quantization method of the composer (panel_method.cpp) and round to nearest beside it
  // (actions_method.cpp): settings, the job and its last result for the loaded tensor.
  MethodSettings method;
  Job<MethodRun> method_job;
  std::shared_ptr<const MethodRun> method_run;
  std::string method_error, started_method;

  // Teaching view.
  int teach_tile = 0;
  // The shown tile's cast values, fetched once per analysis (analyses_done) and tile (from the
  // GPU when the values stayed there).
  uint64_t teach_block_of = ~0ull;
  int64_t teach_block_tile = -1;
  Tensor teach_block;
  // What the teaching view plotted last (for scripted checks): the tile, the whole scale the
  // elements are divided by (tile scale x tensor scale), the grid, each element's x / scale and
  // rounded / scale, and how many it marked clipped against the tile map's count for the tile.
  struct TeachShown {
    int64_t tile = -1;
    double scale = 0, tensor_scale = 0;
    std::vector<double> grid, xs, qs;
    int64_t clipped = 0, tile_clipped = -1;
    // On a GPTQ tile: the values GPTQ chose and the nearest ones on its scales, per element
    // shown, and how many differ in the tile (-1: not shown) and in the tensor.
    std::vector<double> method_q, nearest_q;
    std::vector<int64_t> elements;  // their flat indices in the tensor
    int64_t moved = -1, moved_total = -1;
  } teach_shown;
  bool teach_linear = false;
  int focus_panel = -1;  // panel to bring to front next frame
  bool hist_log_y = true;
  bool hist_log_x = false;
  int view_tab = -1;               // set by scripts/shortcuts to select a views tab
  widgets::AxisView hist_view[3];  // x zoom of the value, exponent and error histograms
  widgets::HeatmapState heat;
  widgets::MaskViewState mask;
  char open_path[1024] = "";
  bool focus_open_path = false;
  bool focus_dtype = false;
  char filter[128] = "";
  std::vector<std::string> recent;
  std::deque<std::string> messages;  // notices and errors, newest last
  uint64_t frame = 0;
  double fps = 0;
  bool quit = false;
  bool screenshot_requested = false;
  std::string screenshot_path;

  void note(std::string msg) {
    messages.push_back(std::move(msg));
    while (messages.size() > 50) messages.pop_front();
  }
  bool busy() const {
    return loader.running() || analyzer.running() || scale_job.running() || compare_job.running() ||
           plan_job.running() || auto_job.running() || export_job.running() || gemm_job.running() ||
           map_job.running() || act_job.running() || budget_job.running() || pick_job.running() ||
           method_job.running();
  }
  bool shown(PanelId p) const { return show[static_cast<int>(p)]; }
};

// Actions shared by panels, shortcuts and scripts (actions.cpp).
void open_source(AppState& app, const std::string& spec);  // file path, "demo" or "demo:NAME"
void select_tensor(AppState& app, const std::string& name);
bool set_dtype(AppState& app, const std::string& text);  // false (and a message) when invalid
void update_jobs(AppState& app);  // once per frame: collect results, start pending work
void set_theme(AppState& app, bool dark);
void update_decision_jobs(AppState& app);  // comparison / plan panels (actions_compare.cpp)
// The composer's round, scale mode, overflow and axis: what the plan panels cast with.
CastOptions composer_cast_options(const AppState& app);
void start_auto_assign(AppState& app);
// Budget planner (actions_budget.cpp): the table and curve of the open model, the plan for
// app.plan_budget (started when the budget or table changed), and its rules into app.plan.
void start_budget_table(AppState& app);
void update_budget_jobs(AppState& app);
void apply_budget_plan(AppState& app);
void start_export(AppState& app);
void start_gemm(AppState& app);
void add_plan_rule(AppState& app, const std::string& pattern, const std::string& dtype);
// Model map and activations (actions_map.cpp).
void start_model_map(AppState& app);
void assign_from_map(AppState& app, size_t row, size_t col);  // a click on a cell
void start_activations(AppState& app);
void update_map_jobs(AppState& app);
// The method job (actions_method.cpp): rtn beside the composer's method, started when its inputs
// changed and a panel that shows it is visible.
void update_method_jobs(AppState& app);
std::string method_state_json(const AppState& app);  // settings and last result, for scripts
// The map's rows of these tensors swept again on the open model (their layout changed); a whole
// sweep when one is running.
void redo_map_rows(AppState& app, const std::vector<std::string>& names);
// Makes `model` follow the plan's axis-only rules when they changed (actions.cpp): the views of
// the loaded tensor and the map's rows of the tensors whose layout changed are computed again.
void sync_layout_overrides(AppState& app, bool new_file);
Rotation map_rotation(const AppState& app);
MapTotals plan_totals_over_map(const AppState& app);  // the plan's size over the map's rows
// The options a plan casts tensor `t` with: `base` with the plan's axis for it, resolved for its
// layout (throws Error for an axis that does not fit).
CastOptions plan_tensor_options(const ExportPlan& plan, const io::TensorInfo& t, CastOptions base);
// Storage bits per value of the map's column `col` on row `r` (storage_bits, the axis its cells
// were cast on), with the nominal figure and the row length for the label; NaN where the
// datatype has no storage on that axis.
double map_cell_bits(const AppState& app, const MapRow& r, size_t col, double* nominal = nullptr,
                     int64_t* row_length = nullptr);
bool save_text(AppState& app, const std::string& path, const std::string& text);
// Metrics of the current analysis (.csv or .json by extension).
bool save_metrics(AppState& app, const std::string& path);

// Recent files (~/.config/castscope/recent.json).
std::vector<std::string> load_recent();
void remember_recent(AppState& app, const std::string& path);

}  // namespace castscope::gui
