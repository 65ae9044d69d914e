#include "ui_probe.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cstdio>
#include <cstring>

namespace castscope::gui::probe {

namespace {

bool g_recording = false;
std::vector<Item> g_items, g_last_items;
std::vector<TextRun> g_texts, g_last_texts;
// The frame of the last text field added: its text scrolls inside it, so a long entry being cut
// there is how text fields work, not a layout problem.
ImRect g_field;
const ImDrawList* g_field_list = nullptr;

std::string short_text(const std::string& s) {
  std::string t = s.substr(0, std::min<size_t>(s.find('\n'), 60));
  if (t.size() < s.size()) t += "...";
  return "'" + t + "'";
}

}  // namespace

void set_recording(bool on) {
  g_recording = on;
}

void end_frame() {
  g_last_items.swap(g_items);
  g_items.clear();
  g_last_texts.swap(g_texts);
  g_texts.clear();
}

const std::vector<Item>& items() {
  return g_last_items;
}

const std::vector<TextRun>& texts() {
  return g_last_texts;
}

bool window_matches(const ImGuiWindow* w, const std::string& name) {
  if (!w || !w->Name) return false;
  const std::string n = w->Name;
  if (n == name) return true;
  // Child windows are named "Parent/label_0123ABCD".
  if (!(w->Flags & ImGuiWindowFlags_ChildWindow)) return false;
  const size_t slash = n.rfind('/'), us = n.rfind('_');
  return slash != std::string::npos && us != std::string::npos && us > slash &&
         n.compare(slash + 1, us - slash - 1, name) == 0;
}

ImGuiWindow* find_window(const std::string& name) {
  ImGuiContext& g = *GImGui;
  for (int i = g.Windows.Size - 1; i >= 0; --i) {  // back to front: the frontmost comes last
    ImGuiWindow* w = g.Windows[i];
    if (w->Active && !w->Hidden && window_matches(w, name)) return w;
  }
  return nullptr;
}

std::vector<const Item*> find_items(const std::string& label, const std::string& window) {
  std::vector<const Item*> out;
  for (const Item& it : g_last_items) {
    if (!window.empty() && !window_matches(it.window, window) &&
        !(it.window && window_matches(it.window->RootWindow, window)))
      continue;
    if (it.id == 0) continue;
    // A plain widget is GetID(label); the text field of InputInt / InputFloat with step buttons
    // is drawn under PushID(label) with an empty label, so its ID is that pushed ID.
    if (ImHashStr(label.c_str(), 0, it.seed) == it.id ||
        (it.id == it.seed && ImHashStr(label.c_str(), 0, it.parent_seed) == it.id))
      out.push_back(&it);
  }
  return out;
}

std::vector<std::string> layout_problems() {
  std::vector<std::string> out;
  auto where = [](const TextRun& t) {
    char b[96];
    std::snprintf(b, sizeof b, " at (%.0f, %.0f)", t.rect.Min.x, t.rect.Min.y);
    return " in window '" + t.window + "'" + b;
  };
  std::vector<const TextRun*> shown;
  for (const TextRun& t : g_last_texts) {
    if (t.tooltip) continue;
    ImRect vis = t.rect;
    vis.ClipWithFull(t.clip);
    if (vis.GetWidth() < 1 || vis.GetHeight() < 1) continue;  // scrolled or culled away entirely
    shown.push_back(&t);
    const bool cut_x = t.rect.Min.x < t.clip.Min.x - 0.5f || t.rect.Max.x > t.clip.Max.x + 0.5f;
    const bool cut_y = t.rect.Min.y < t.clip.Min.y - 0.5f || t.rect.Max.y > t.clip.Max.y + 0.5f;
    char b[64];
    std::snprintf(b, sizeof b, " (%.0f of %.0f px shown)", cut_x ? vis.GetWidth() : vis.GetHeight(),
                  cut_x ? t.rect.GetWidth() : t.rect.GetHeight());
    if (t.in_field)
      ;
    else if (cut_x && !t.scroll_x)
      out.push_back("text " + short_text(t.text) + " cut off at the side" + b + where(t));
    else if (cut_y && !t.scroll_y)
      out.push_back("text " + short_text(t.text) + " cut off at the top or bottom" + b + where(t));
  }
  for (size_t i = 0; i < shown.size(); ++i)
    for (size_t j = i + 1; j < shown.size(); ++j) {
      const TextRun &a = *shown[i], &b = *shown[j];
      if (a.window != b.window || a.text == b.text) continue;  // same text twice: a drop shadow
      ImRect va = a.rect, vb = b.rect;
      va.ClipWithFull(a.clip);
      vb.ClipWithFull(b.clip);
      ImRect both = va;
      both.ClipWithFull(vb);
      if (both.GetWidth() > 1.5f && both.GetHeight() > 1.5f)
        out.push_back("text " + short_text(a.text) + " overlaps " + short_text(b.text) + where(a));
    }
  return out;
}

std::string tooltip_text() {
  std::string s;
  for (const TextRun& t : g_last_texts)
    if (t.tooltip) s += (s.empty() ? "" : "\n") + t.text;
  return s;
}

namespace {

void record_item(const ImRect& bb, ImGuiID id, bool visible) {
  ImGuiContext& g = *GImGui;
  ImGuiWindow* w = g.CurrentWindow;
  if (!w) return;
  Item it;
  it.id = id;
  it.seed = w->IDStack.empty() ? 0 : w->IDStack.back();
  it.parent_seed = w->IDStack.Size >= 2 ? w->IDStack[w->IDStack.Size - 2] : 0;
  it.rect = bb;
  it.clip = w->ClipRect;
  it.window = w;
  it.visible = visible;
  it.disabled = (g.CurrentItemFlags & ImGuiItemFlags_Disabled) != 0;
  g_items.push_back(it);
}

void record_text(const ImDrawList* dl, const ImFont* font, float size, const ImVec2& pos, ImU32 col,
                 const char* begin, const char* end, float wrap, const ImVec4* fine_clip) {
  if (!begin || (col & IM_COL32_A_MASK) == 0) return;
  if (!end) end = begin + std::strlen(begin);
  while (end > begin && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
  if (end == begin) return;
  if (!font) font = GImGui->Font;
  if (size == 0) size = GImGui->FontSize;
  if (!font) return;
  const ImVec2 sz = font->CalcTextSizeA(size, FLT_MAX, wrap, begin, end);
  TextRun t;
  t.text.assign(begin, end);
  t.rect = ImRect(pos, ImVec2(pos.x + sz.x, pos.y + sz.y));
  const ImVec4 c = dl->_CmdHeader.ClipRect;
  t.clip = ImRect(c.x, c.y, c.z, c.w);
  if (fine_clip)
    t.clip.ClipWithFull(ImRect(fine_clip->x, fine_clip->y, fine_clip->z, fine_clip->w));
  ImGuiContext& g = *GImGui;
  ImGuiWindow* w = g.CurrentWindow && g.CurrentWindow->DrawList == dl
                       ? g.CurrentWindow
                       : (dl->_OwnerName ? ImGui::FindWindowByName(dl->_OwnerName) : nullptr);
  t.window = dl->_OwnerName ? dl->_OwnerName : "";
  t.in_field = dl == g_field_list && g_field.Contains(pos);
  if (w) {
    t.tooltip = (w->RootWindow ? w->RootWindow->Flags : w->Flags) & ImGuiWindowFlags_Tooltip;
    t.scroll_x = w->ScrollbarX;  // content past the edge without a scrollbar is lost
    t.scroll_y = w->ScrollbarY;
  }
  g_texts.push_back(std::move(t));
}

}  // namespace

}  // namespace castscope::gui::probe

// The --wrap targets (app/CMakeLists.txt). The mangled names are those of Dear ImGui 1.86's
// ImGui::ItemAdd(const ImRect&, ImGuiID, const ImRect*, ImGuiItemFlags) and the two
// ImDrawList::AddText overloads.
extern "C" {
bool __real__ZN5ImGui7ItemAddERK6ImRectjPS1_i(const ImRect& bb, ImGuiID id, const ImRect* nav_bb,
                                              ImGuiItemFlags flags);
bool __wrap__ZN5ImGui7ItemAddERK6ImRectjPS1_i(const ImRect& bb, ImGuiID id, const ImRect* nav_bb,
                                              ImGuiItemFlags flags) {
  const bool visible = __real__ZN5ImGui7ItemAddERK6ImRectjPS1_i(bb, id, nav_bb, flags);
  if (castscope::gui::probe::g_recording && id != 0) {
    castscope::gui::probe::record_item(bb, id, visible);
    if ((flags & ImGuiItemFlags_Inputable) && GImGui->CurrentWindow) {
      castscope::gui::probe::g_field = nav_bb ? *nav_bb : bb;
      castscope::gui::probe::g_field_list = GImGui->CurrentWindow->DrawList;
    }
  }
  return visible;
}

void __real__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(
    ImDrawList* self, const ImFont* font, float size, const ImVec2& pos, ImU32 col,
    const char* begin, const char* end, float wrap, const ImVec4* fine_clip);
void __wrap__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(
    ImDrawList* self, const ImFont* font, float size, const ImVec2& pos, ImU32 col,
    const char* begin, const char* end, float wrap, const ImVec4* fine_clip) {
  if (castscope::gui::probe::g_recording)
    castscope::gui::probe::record_text(self, font, size, pos, col, begin, end, wrap, fine_clip);
  __real__ZN10ImDrawList7AddTextEPK6ImFontfRK6ImVec2jPKcS7_fPK6ImVec4(self, font, size, pos, col,
                                                                      begin, end, wrap, fine_clip);
}

// The short overload forwards to the long one inside Dear ImGui's own object file, where the
// wrap does not reach, so it is recorded here too.
void __real__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(ImDrawList* self, const ImVec2& pos, ImU32 col,
                                                     const char* begin, const char* end);
void __wrap__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(ImDrawList* self, const ImVec2& pos, ImU32 col,
                                                     const char* begin, const char* end) {
  if (castscope::gui::probe::g_recording)
    castscope::gui::probe::record_text(self, nullptr, 0, pos, col, begin, end, 0, nullptr);
  __real__ZN10ImDrawList7AddTextERK6ImVec2jPKcS4_(self, pos, col, begin, end);
}
}
