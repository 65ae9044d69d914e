// What the last frame put on screen, for scripted sessions: every interactive item's rectangle
// and ID (so a script can point the mouse at a widget by its label) and every piece of text with
// the clip rectangle it was drawn under (so a test can find clipped or overlapping text).
//
// Debian's Dear ImGui is built without the test-engine hooks, so the program is linked with
// --wrap for ImGui::ItemAdd and ImDrawList::AddText (app/CMakeLists.txt): every widget passes
// through the first and every glyph run through the second. Recording is off unless a script
// turns it on; the wrappers then only forward.
#pragma once

#include <imgui.h>
#include <imgui_internal.h>

#include <string>
#include <vector>

namespace castscope::gui::probe {

struct Item {
  ImGuiID id = 0;
  ImGuiID seed = 0;  // the ID stack's top when the item was added: GetID(label) hashes with it
  ImGuiID parent_seed = 0;  // the entry below it (composite widgets push their label's ID)
  ImRect rect;              // the item's full rectangle
  ImRect clip;              // its window's clip rectangle at the time
  ImGuiWindow* window = nullptr;
  bool visible = false;  // ImGui did not clip it away entirely
  bool disabled = false;
};

struct TextRun {
  std::string text;
  std::string window;  // the draw list's owner
  ImRect rect;         // where the glyphs go, unclipped
  ImRect clip;         // what is visible of the draw list there (fine clip included)
  bool tooltip = false;
  bool in_field = false;                    // inside a text field, where long entries scroll
  bool scroll_x = false, scroll_y = false;  // the owner window scrolls that way
};

void set_recording(bool on);
// Called after ImGui::Render(): the frame's records become "the last frame".
void end_frame();
const std::vector<Item>& items();
const std::vector<TextRun>& texts();

// Items whose ID is GetID(label) under their recorded seed, in the named window when one is
// given ("" : any). A window matches by its name or, for a child window, its own label.
std::vector<const Item*> find_items(const std::string& label, const std::string& window);
// The window with that name or child label, active in the last frame, frontmost first.
ImGuiWindow* find_window(const std::string& name);
bool window_matches(const ImGuiWindow* w, const std::string& name);

// Layout problems of the last frame: text cut by its clip rectangle where nothing scrolls to it,
// and text runs of one window that overlap. One line each, naming the text and the window.
std::vector<std::string> layout_problems();
// The text of the tooltips shown in the last frame, lines joined by '\n'.
std::string tooltip_text();

}  // namespace castscope::gui::probe
