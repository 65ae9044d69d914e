// Scripted sessions (--script FILE): one command per line, run between frames so the app
// behaves exactly as with a person at the keyboard. Commands are documented in docs/gui.md.
#pragma once

#include <string>
#include <vector>

#include "app_state.hpp"
#include "script_input.hpp"

namespace castscope::gui {

class Script {
 public:
  // Reads the file; throws Error naming the file or the first malformed line.
  explicit Script(const std::string& path);
  // Runs commands until one has to wait for later frames. Call once per frame, before drawing.
  void step(AppState& app);
  // Called after the frame was rendered: a pending screenshot is taken now.
  bool wants_screenshot() const { return !shot_.empty() && shot_wait_ == 0; }
  std::string take_screenshot_path();
  // Call between the platform backend's NewFrame and ImGui::NewFrame: the script's mouse and
  // keyboard replace the real ones for the whole session.
  void apply_input(ImGuiIO& io);
  bool done() const { return pc_ >= lines_.size() && !input_.busy(); }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  struct Line {
    int number;
    std::string cmd, arg;
  };
  std::string path_;
  std::vector<Line> lines_;
  size_t pc_ = 0;
  int frames_left_ = 0;
  bool waiting_ = false;
  double wait_started_ = 0;
  double wait_limit_s_ = 120;
  std::string shot_;
  int shot_wait_ = 0;
  std::vector<std::string> errors_;
  ScriptInput input_;
  std::string input_where_;  // "file:line: " of the input command whose frames are running
  bool ran_other_ = false;   // a command other than input ran since the last drawn frame
};

// The app's state as JSON: what scripted tests check.
std::string state_json(const AppState& app, const std::vector<std::string>& script_errors);

}  // namespace castscope::gui
