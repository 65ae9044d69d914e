// Everything the desktop app knows, in one plain struct that panels read and edit. Heavy data
// (the loaded tensor, analyses) is held through shared pointers to immutable objects that the
// background jobs publish.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "castscope/io.hpp"
#include "castscope/widgets/analysis.hpp"
#include "castscope/widgets/composer.hpp"
#include "castscope/widgets/heatmap.hpp"
#include "castscope/widgets/mask_view.hpp"
#include "jobs.hpp"

namespace castscope::gui {

struct AppOptions {
  std::string file;    // opened at start ("" : the embedded demo)
  std::string script;  // --script FILE
  std::string state;   // --state FILE: JSON state written on quit (scripted sessions)
  std::string dtype = "mxfp4e2";
  std::string theme = "dark";
  bool headless = false;
  int width = 1600, height = 1000;
};

// What the loader job publishes: the model (shared with earlier loads of the same file) and one
// tensor converted to float32.
struct Loaded {
  std::shared_ptr<const io::Model> model;
  std::string tensor;
  Tensor data;
};

enum class PanelId { Files, Tensors, Composer, Views, Count };
const char* panel_name(PanelId p);

struct AppState {
  AppOptions opt;

  // Model and tensor.
  std::shared_ptr<const io::Model> model;
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

  // UI.
  bool dark = true;
  float dpi_scale = 1.0f;
  bool show[static_cast<int>(PanelId::Count)] = {true, true, true, true};
  int focus_panel = -1;  // panel to bring to front next frame
  bool hist_log_y = true;
  bool hist_log_x = false;
  int view_tab = -1;  // set by scripts/shortcuts to select a views tab
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
  bool busy() const { return loader.running() || analyzer.running(); }
};

// Actions shared by panels, shortcuts and scripts (actions.cpp).
void open_source(AppState& app, const std::string& spec);  // file path, "demo" or "demo:NAME"
void select_tensor(AppState& app, const std::string& name);
bool set_dtype(AppState& app, const std::string& text);  // false (and a message) when invalid
void update_jobs(AppState& app);  // once per frame: collect results, start pending work
void set_theme(AppState& app, bool dark);

// Recent files (~/.config/castscope/recent.json).
std::vector<std::string> load_recent();
void remember_recent(AppState& app, const std::string& path);

}  // namespace castscope::gui
