#include "script_input.hpp"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "castscope/error.hpp"
#include "ui_probe.hpp"

namespace castscope::gui {

namespace {

const char* const kInputCommands[] = {
    "click",          "double-click", "right-click", "hover",           "drag",
    "scroll",         "type",         "choose",      "expect-disabled", "expect-enabled",
    "expect-tooltip", "expect-text",  "check-layout"};

// Splits on spaces; "double quotes" keep spaces inside one word.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : s) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (any) out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (quoted) throw Error("unbalanced quote in '" + s + "'");
  if (any) out.push_back(cur);
  return out;
}

float number(const std::string& s, const std::string& what) {
  try {
    size_t used = 0;
    const float v = std::stof(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw Error(what + ": '" + s + "' is not a number");
}

std::string window_name(const ImGuiWindow* w) {
  return w && w->Name ? w->Name : "?";
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// The optional "at FX FY", "to FX FY", "button B" and a bare number, after the target.
struct Args {
  ImVec2 at = ImVec2(-1, -1), to = ImVec2(-1, -1);
  int button = 0;
  float amount = 0;
  bool has_amount = false;
};

Args parse_args(const std::vector<std::string>& w, size_t from, const std::string& cmd) {
  Args a;
  for (size_t i = from; i < w.size(); ++i) {
    if ((w[i] == "at" || w[i] == "to") && i + 2 < w.size()) {
      const ImVec2 v(number(w[i + 1], cmd), number(w[i + 2], cmd));
      (w[i] == "at" ? a.at : a.to) = v;
      i += 2;
    } else if (w[i] == "button" && i + 1 < w.size()) {
      const std::string b = w[++i];
      a.button = b == "left" ? 0 : b == "right" ? 1 : b == "middle" ? 2 : -1;
      if (a.button < 0) throw Error(cmd + ": button is left, right or middle");
    } else if (!a.has_amount) {
      a.amount = number(w[i], cmd);
      a.has_amount = true;
    } else {
      throw Error(cmd + ": unexpected '" + w[i] + "'");
    }
  }
  return a;
}

}  // namespace

bool ScriptInput::handles(const std::string& cmd) {
  for (const char* c : kInputCommands)
    if (cmd == c) return true;
  return false;
}

std::vector<std::string> ScriptInput::take_errors() {
  std::vector<std::string> e;
  e.swap(errors_);
  return e;
}

// TARGET is LABEL, WINDOW::LABEL or WINDOW:: (the window itself, or a child window by its label).
// LABEL is what the code passes to the widget, "##id" part included, or 0xHEX for a raw ID.
ScriptInput::Target ScriptInput::resolve(const std::string& spec, bool* scrolled) {
  *scrolled = false;
  std::string win, label = spec;
  const size_t sep = spec.find("::");
  if (sep != std::string::npos) win = spec.substr(0, sep), label = spec.substr(sep + 2);
  Target t;
  t.what = "'" + spec + "'";
  if (label.empty()) {
    ImGuiWindow* w = probe::find_window(win);
    if (!w) throw Error("no window '" + win + "' is shown");
    t.window = w;
    t.rect = w->InnerRect;
    t.clip = w->InnerClipRect;
    return t;
  }
  std::vector<const probe::Item*> found;
  if (label.size() > 2 && label.compare(0, 2, "0x") == 0) {
    const ImGuiID id = static_cast<ImGuiID>(std::stoul(label, nullptr, 16));
    for (const probe::Item& it : probe::items())
      if (it.id == id && (win.empty() || probe::window_matches(it.window, win) ||
                          probe::window_matches(it.window->RootWindow, win)))
        found.push_back(&it);
  } else {
    found = probe::find_items(label, win);
  }
  if (found.empty())
    throw Error("no widget " + t.what + " in the last frame" +
                (win.empty() ? std::string() : " of window '" + win + "'"));
  // The same widget can be submitted twice in a frame (a tooltip re-drawing it); windows differ
  // only when the label is ambiguous.
  for (const probe::Item* it : found)
    if (it->window != found[0]->window)
      throw Error("widget " + t.what + " is in windows '" + window_name(found[0]->window) +
                  "' and '" + window_name(it->window) + "': write WINDOW::LABEL");
  const probe::Item& it = *found[0];
  t.window = it.window;
  t.rect = it.rect;
  t.clip = it.rect;
  t.clip.ClipWithFull(it.clip);
  t.disabled = it.disabled;
  if (!it.visible || t.clip.GetWidth() < 1 || t.clip.GetHeight() < 1) {
    // Scrolled out of its window: turn the wheel over that window towards it, as a person would.
    // Sideways (a table's columns past its edge) with the horizontal wheel once it is level.
    ImGuiWindow* w = it.window;
    const ImRect& in = w ? w->InnerClipRect : it.rect;
    const bool level = it.rect.Max.y > in.Min.y && it.rect.Min.y < in.Max.y;
    const bool sideways =
        w && level && w->ScrollMax.x > 0 &&
        (it.rect.Max.x <= in.Min.x + 1 || it.rect.Min.x >= in.Max.x - 1 || t.clip.GetWidth() < 1);
    if (!w || (!sideways && w->ScrollMax.y <= 0) || ++retries_ > 80)
      throw Error("widget " + t.what + " is not visible in window '" + window_name(w) + "'");
    Frame f;
    f.move = true;
    f.pos = in.GetCenter();
    f.what = t.what;
    frames_.push_back(f);
    f.move = false;
    if (sideways)
      f.wheel_h = it.rect.Min.x < in.Min.x + 1 ? 1.0f : -1.0f;
    else
      f.wheel = it.rect.Min.y < in.Min.y ? 1.0f : -1.0f;
    frames_.push_back(f);
    f.wheel = f.wheel_h = 0;
    frames_.push_back(f);
    *scrolled = true;
  }
  return t;
}

void ScriptInput::press(const Target& t, ImVec2 at, int button, bool twice) {
  Frame move;
  move.move = true;
  move.pos = at;
  move.what = t.what;
  frames_.push_back(move);
  Frame down;
  down.down[button] = true;
  down.expect_under = t.window;
  down.what = t.what;
  down.double_click = twice;
  Frame up;
  up.double_click = twice;
  frames_.push_back(down);
  frames_.push_back(up);
  if (twice) {
    frames_.push_back(down);
    frames_.push_back(up);
  }
}

ScriptInput::Next ScriptInput::start(const std::string& cmd, const std::string& arg) {
  const std::vector<std::string> w = words(arg);
  if (cmd == "check-layout") {
    // check-layout [except WINDOW...]: windows whose name contains WINDOW are set aside.
    std::vector<std::string> p;
    for (const std::string& problem : probe::layout_problems()) {
      bool skip = false;
      for (size_t i = 1; i < w.size() && !w.empty() && w[0] == "except"; ++i)
        skip |= problem.find("in window '") != std::string::npos &&
                problem.substr(problem.rfind("in window '")).find(w[i]) != std::string::npos;
      if (!skip) p.push_back(problem);
    }
    if (!p.empty()) {
      std::string all = std::to_string(p.size()) + " layout problem(s):";
      for (const std::string& s : p) all += "\n  " + s;
      throw Error(all);
    }
    return Next::Continue;
  }
  if (cmd == "expect-tooltip") {
    const std::string tip = probe::tooltip_text();
    if (tip.find(arg) == std::string::npos)
      throw Error("the tooltip " +
                  (tip.empty() ? std::string("is not shown") : "reads '" + tip + "'") + ", not '" +
                  arg + "'");
    return Next::Continue;
  }
  if (cmd == "expect-text") {
    // Text drawn in the last frame outside tooltips, as it reads on screen; "^TEXT": a run that
    // starts with TEXT.
    const bool start = !arg.empty() && arg[0] == '^';
    const std::string want = start ? arg.substr(1) : arg;
    for (const probe::TextRun& t : probe::texts())
      if (!t.tooltip &&
          (start ? t.text.rfind(want, 0) == 0 : t.text.find(want) != std::string::npos))
        return Next::Continue;
    throw Error("no text of the last frame reads '" + arg + "'");
  }
  if (w.empty()) throw Error(cmd + " needs a target");
  if (cmd == "hover" && w[0] == "none") {  // the pointer leaves the window
    Frame f;
    f.move = true;
    f.pos = ImVec2(-FLT_MAX, -FLT_MAX);
    frames_.push_back(f);
    frames_.push_back(Frame{});
    return Next::Continue;
  }
  bool scrolled = false;
  const Target t = resolve(w[0], &scrolled);
  if (scrolled) return Next::Retry;
  retries_ = 0;
  if (cmd == "expect-disabled" || cmd == "expect-enabled") {
    if (t.disabled != (cmd == "expect-disabled"))
      throw Error("widget " + t.what + " is " + (t.disabled ? "disabled" : "enabled"));
    return Next::Continue;
  }
  const Args a = parse_args(w, cmd == "type" || cmd == "choose" ? w.size() : 1, cmd);
  auto point = [&](ImVec2 f) {
    if (f.x < 0) return t.clip.GetCenter();
    const ImVec2 p(t.rect.Min.x + f.x * t.rect.GetWidth(), t.rect.Min.y + f.y * t.rect.GetHeight());
    if (!t.clip.Contains(p))
      throw Error("point (" + std::to_string(f.x) + ", " + std::to_string(f.y) + ") of " + t.what +
                  " is outside what is visible of it");
    return p;
  };
  const bool acts = cmd != "hover" && cmd != "scroll";
  if (acts && t.disabled)
    throw Error("widget " + t.what + " is disabled: a click would do nothing");
  if (cmd == "hover") {
    Frame f;
    f.move = true;
    f.pos = point(a.at);
    f.what = t.what;
    frames_.push_back(f);
    Frame still;
    still.expect_under = t.window;
    still.what = t.what;
    frames_.push_back(still);
    frames_.push_back(Frame{});
  } else if (cmd == "click" || cmd == "double-click" || cmd == "right-click") {
    press(t, point(a.at), cmd == "right-click" ? 1 : a.button, cmd == "double-click");
  } else if (cmd == "scroll") {
    if (!a.has_amount) throw Error("scroll TARGET N [at FX FY]: N wheel steps, up positive");
    Frame f;
    f.move = true;
    f.pos = point(a.at);
    f.what = t.what;
    frames_.push_back(f);
    // One notch a frame, as a wheel turns: widgets that zoom per event see every notch.
    const int notches = std::max(1, static_cast<int>(std::lround(std::fabs(a.amount))));
    for (int i = 0; i < notches; ++i) {
      Frame turn;
      turn.wheel = a.amount / notches;
      turn.expect_under = i == 0 ? t.window : nullptr;
      turn.what = t.what;
      frames_.push_back(turn);
    }
    frames_.push_back(Frame{});
  } else if (cmd == "drag") {
    if (a.to.x < 0) throw Error("drag TARGET [at FX FY] to FX FY [button B]");
    const ImVec2 p0 = point(a.at);
    const ImVec2 p1(t.rect.Min.x + a.to.x * t.rect.GetWidth(),
                    t.rect.Min.y + a.to.y * t.rect.GetHeight());
    Frame f;
    f.move = true;
    f.pos = p0;
    f.what = t.what;
    frames_.push_back(f);
    f.down[a.button] = true;
    f.expect_under = t.window;
    frames_.push_back(f);
    f.expect_under = nullptr;
    const int steps = 8;  // past ImGui's drag threshold in the first step, then smoothly
    for (int i = 1; i <= steps; ++i) {
      f.pos = ImVec2(p0.x + (p1.x - p0.x) * i / steps, p0.y + (p1.y - p0.y) * i / steps);
      frames_.push_back(f);
    }
    f.down[a.button] = false;
    frames_.push_back(f);
  } else if (cmd == "type") {
    // Click into the field, select all, type, Enter: the field's old text is replaced.
    std::string text;
    for (size_t i = 1; i < w.size(); ++i) text += (i > 1 ? " " : "") + w[i];
    press(t, point(ImVec2(-1, -1)), 0, false);
    Frame sel;
    sel.ctrl = true;
    sel.keys = {GLFW_KEY_A};
    frames_.push_back(sel);
    frames_.push_back(Frame{});
    Frame chars;
    chars.chars = text;
    frames_.push_back(chars);
    Frame enter;
    enter.keys = {GLFW_KEY_ENTER};
    frames_.push_back(enter);
    frames_.push_back(Frame{});
  } else if (cmd == "choose") {
    if (w.size() < 2) throw Error("choose COMBO ITEM");
    press(t, point(ImVec2(-1, -1)), 0, false);
    then_ = w[1];
    then_what_ = t.what;
  }
  return Next::Continue;
}

void ScriptInput::apply(ImGuiIO& io) {
  if (default_dclick_ < 0) default_dclick_ = io.MouseDoubleClickTime;
  if (frames_.empty() && !then_.empty()) {
    // The combo's list is open now: find the entry by its label, or by the text it shows (first
    // word), and click it; scroll the list when it is further down.
    const std::string item = then_;
    ImGuiWindow* popup = nullptr;
    ImGuiContext& g = *GImGui;
    for (int i = g.Windows.Size - 1; i >= 0 && !popup; --i)
      if (g.Windows[i]->Active && (g.Windows[i]->Flags & ImGuiWindowFlags_Popup) &&
          !(g.Windows[i]->Flags & ImGuiWindowFlags_Tooltip))
        popup = g.Windows[i];
    Target t;
    bool found = false;
    const bool same_size =
        popup && popup->Size.x == popup_size_.x && popup->Size.y == popup_size_.y;
    if (popup) popup_size_ = popup->Size;
    bool any_visible = false;
    for (const probe::Item& it : probe::items()) any_visible |= it.window == popup && it.visible;
    if (popup) {
      for (const probe::Item& it : probe::items())
        if (it.window == popup && it.visible && ImHashStr(item.c_str(), 0, it.seed) == it.id) {
          t.rect = it.rect, t.clip = it.rect, t.window = popup, found = true;
          t.clip.ClipWithFull(it.clip);
          break;
        }
      for (const probe::TextRun& r : probe::texts()) {
        if (found) break;
        if (r.window != window_name(popup)) continue;
        const std::string s = trim(r.text);
        if (s == item || (s.compare(0, item.size(), item) == 0 && s.size() > item.size() &&
                          std::isspace(static_cast<unsigned char>(s[item.size()])))) {
          t.rect = r.rect, t.clip = r.rect, t.window = popup, found = true;
          t.clip.ClipWithFull(r.clip);
        }
      }
    }
    t.what = "'" + item + "' in " + then_what_;
    if (found && same_size && t.clip.GetWidth() >= 1 && t.clip.GetHeight() >= 1) {
      then_.clear();
      retries_ = 0;
      press(t, t.clip.GetCenter(), 0, false);
    } else if (popup && (popup->Hidden || popup->Appearing || !any_visible || !same_size) &&
               ++retries_ < 10) {
      frames_.push_back(Frame{});  // a list is sized over its first frames: wait for all of it
    } else if (popup && popup->Scroll.y < popup->ScrollMax.y && ++retries_ < 200) {
      Frame f;
      f.move = true;
      f.pos = popup->InnerClipRect.GetCenter();
      frames_.push_back(f);
      f.move = false;
      f.wheel = -1;
      frames_.push_back(f);
    } else {
      errors_.push_back(popup ? "no entry " + t.what + " in the list"
                              : then_what_ + " opened no list");
      then_.clear();
      retries_ = 0;
    }
  }
  Frame f;
  if (!frames_.empty()) {
    f = frames_.front();
    frames_.pop_front();
    if (f.expect_under) {
      ImGuiWindow* hw = GImGui->HoveredWindow;
      if (!hw || hw->RootWindow != f.expect_under->RootWindow) {
        errors_.push_back(f.what + " is covered by window '" +
                          (hw ? window_name(hw->RootWindow) : std::string("none")) +
                          "' where the pointer went");
        frames_.clear();
        then_.clear();
        f = Frame{};
      }
    }
  }
  if (f.move) mouse_ = f.pos;
  io.MousePos = mouse_;
  for (int b = 0; b < 3; ++b) io.MouseDown[b] = f.down[b];
  io.MouseWheel = f.wheel;
  io.MouseWheelH = f.wheel_h;
  io.MouseDoubleClickTime = f.double_click ? 1e6f : default_dclick_;
  io.KeyCtrl = f.ctrl;
  io.KeyShift = io.KeyAlt = io.KeySuper = false;
  std::fill(std::begin(io.KeysDown), std::end(io.KeysDown), false);
  for (int k : f.keys) io.KeysDown[k] = true;
  if (!f.chars.empty()) io.AddInputCharactersUTF8(f.chars.c_str());
}

}  // namespace castscope::gui
