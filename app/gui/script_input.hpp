// The mouse and keyboard of a scripted session: commands that point at a widget by its label (or
// at a spot of a window, child window or plot) and act there as a person would, by feeding
// Dear ImGui synthetic input over several frames. Targets are found in the rectangles the last
// frame recorded (ui_probe.hpp). Commands are documented in docs/gui.md.
#pragma once

#include <imgui.h>
#include <imgui_internal.h>

#include <deque>
#include <string>
#include <vector>

namespace castscope::gui {

class ScriptInput {
 public:
  static bool handles(const std::string& cmd);
  // What start() asks of the script: go on with the next line, or run this line again next frame
  // (its target had to be scrolled into view first).
  enum class Next { Continue, Retry };
  // Queues the frames of one command, or checks something of the last frame at once. Throws
  // Error when the target is missing, ambiguous, hidden, covered or disabled.
  Next start(const std::string& cmd, const std::string& arg);
  bool busy() const { return !frames_.empty() || !then_.empty(); }
  // Call between the platform backend's NewFrame and ImGui::NewFrame: this frame's input.
  void apply(ImGuiIO& io);
  // Errors found while the frames ran (a target covered by another window when reached).
  std::vector<std::string> take_errors();

 private:
  struct Frame {
    bool move = false;
    ImVec2 pos;
    bool down[3] = {false, false, false};
    float wheel = 0, wheel_h = 0;  // vertical, horizontal (positive: towards the start)
    bool ctrl = false;
    std::vector<int> keys;
    std::string chars;
    bool double_click = false;
    ImGuiWindow* expect_under = nullptr;  // the pointer must be over this window (its root)
    std::string what;
  };
  struct Target {
    ImRect rect;  // what fractions refer to
    ImRect clip;  // what of it can be clicked
    ImGuiWindow* window = nullptr;
    bool disabled = false;
    std::string what;
  };
  Target resolve(const std::string& spec, bool* scrolled);
  void press(const Target& t, ImVec2 at, int button, bool twice);

  std::deque<Frame> frames_;
  std::string then_;  // a second step that needs the first step's frames drawn (choose ITEM)
  std::string then_what_;
  ImVec2 mouse_ = ImVec2(-FLT_MAX, -FLT_MAX);
  int retries_ = 0;
  ImVec2 popup_size_;  // the open list's size when last looked at: it is used once it holds
  float default_dclick_ = -1;
  std::vector<std::string> errors_;
};

}  // namespace castscope::gui
