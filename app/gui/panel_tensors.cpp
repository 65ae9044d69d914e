// Tensor browser: the open model's tensors as a tree (names split at '.' and '/'), with shape,
// stored dtype and size; a filter box switches to a flat list of matches.
#include <imgui.h>

#include <filesystem>

#include <algorithm>
#include <cctype>
#include <map>

#include "panels.hpp"

namespace castscope::gui {

namespace {

struct Node {
  std::map<std::string, Node> kids;
  int tensor = -1;
};

void build(Node& root, const std::vector<io::TensorInfo>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    Node* n = &root;
    const std::string& name = ts[i].name;
    size_t a = 0;
    while (a <= name.size()) {
      size_t b = name.find_first_of("./", a);
      if (b == std::string::npos) b = name.size();
      n = &n->kids[name.substr(a, b - a)];
      a = b + 1;
    }
    n->tensor = static_cast<int>(i);
  }
}

bool contains_ci(const std::string& s, const char* needle) {
  std::string a = s, b = needle;
  auto low = [](std::string& x) {
    for (char& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  low(a);
  low(b);
  return a.find(b) != std::string::npos;
}

// Columns after the name, as many as the panel's width leaves the name at least ~9 characters.
int g_columns = 4;

void leaf_columns(AppState& app, const io::TensorInfo& t, const char* label) {
  const bool sel = app.selected == t.name;
  if (ImGui::Selectable(label, sel, ImGuiSelectableFlags_SpanAllColumns) && !sel)
    select_tensor(app, t.name);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "%s\n%s %s, %s\n%s", t.name.c_str(), t.dtype.c_str(), shape_str(t.shape).c_str(),
        human_bytes(static_cast<double>(t.nbytes)).c_str(), model_relative(app, t.file).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(shape_str(t.shape).c_str());
  if (g_columns > 2) {
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(t.dtype.c_str());
  }
  if (g_columns > 3) {
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(human_bytes(static_cast<double>(t.nbytes)).c_str());
  }
  if (g_columns > 4) {
    ImGui::TableNextColumn();
    // The resolved quantization layout: what every figure of this tensor is cast along.
    if (!t.layout.empty() && t.shape.size() >= 2) {
      const std::string text = t.layout.axis.str() + "  " + t.layout.layout +
                               (t.layout.guessed ? "  (layout guessed)" : "") +
                               (t.layout.conflict ? "  (consumers disagree)" : "");
      const std::string fitted = fit_text(text, ImGui::GetContentRegionAvail().x);
      if (t.layout.guessed || t.layout.conflict)
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%s", fitted.c_str());
      else
        ImGui::TextUnformatted(fitted.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", describe_layout(t.layout, t.shape).c_str());
    }
  }
}

// A tree label shortened to the name column, its ID kept from the full label.
std::string tree_label(const std::string& label) {
  const float room = ImGui::GetContentRegionAvail().x - ImGui::GetTreeNodeToLabelSpacing();
  return fit_text(label, room) + "###" + label;
}

void draw_node(AppState& app, const std::string& label, const Node& n,
               const std::vector<io::TensorInfo>& ts) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  if (n.tensor >= 0 && n.kids.empty()) {
    // The leaf's own ID differs from its row's ("###" + full name): a tensor outside any scope
    // has its name as its label, and a shared ID made the row unclickable.
    ImGui::TreeNodeEx(
        (tree_label(label) + " leaf").c_str(),
        ImGuiTreeNodeFlags_Leaf | ImGuiTreeNodeFlags_NoTreePushOnOpen | ImGuiTreeNodeFlags_Bullet);
    ImGui::SameLine();
    leaf_columns(app, ts[n.tensor], ("###" + ts[n.tensor].name).c_str());
    return;
  }
  const bool open = ImGui::TreeNodeEx(
      tree_label(label).c_str(), ImGuiTreeNodeFlags_SpanFullWidth | ImGuiTreeNodeFlags_DefaultOpen);
  if (open) {
    for (const auto& [k, child] : n.kids) draw_node(app, k, child, ts);
    ImGui::TreePop();
  }
}

}  // namespace

void draw_tensors_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Tensors, "Tensors", 0.0f, 0.36f, 0.22f, 0.64f)) return;
  static const io::Model* built_for = nullptr;
  static Node root;
  if (!app.model) {
    ImGui::TextDisabled(app.loader.running() ? "opening..." : "no model open");
    if (!app.load_error.empty()) ImGui::TextWrapped("%s", app.load_error.c_str());
    ImGui::End();
    return;
  }
  const auto& ts = app.model->tensors();
  if (built_for != app.model.get()) {
    root = Node{};
    build(root, ts);
    built_for = app.model.get();
  }
  uint64_t total = 0;
  for (const auto& t : ts) total += t.nbytes;
  {
    // The file's own name (a path wrapped over lines reads badly), the full path on hover.
    const std::string base = std::filesystem::path(app.model_path).filename().string();
    ImGui::TextWrapped(
        "%s (%s): %zu tensors, %s", base.empty() ? app.model_path.c_str() : base.c_str(),
        app.model->format().c_str(), ts.size(), human_bytes(static_cast<double>(total)).c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", app.model_path.c_str());
  }
  ImGui::SetNextItemWidth(-FLT_MIN);
  ImGui::InputTextWithHint("##filter", "filter by name", app.filter, sizeof app.filter);
  if (!app.load_error.empty()) error_text(app.load_error);
  // Loading another tensor while one loads would race for the views: wait for it.
  ImGui::BeginDisabled(app.loader.running());
  const ImGuiTableFlags tf = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                             ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
  const float fs = ImGui::GetFontSize(), avail = ImGui::GetContentRegionAvail().x;
  g_columns = avail >= 40 * fs ? 5 : avail >= 27 * fs ? 4 : avail >= 22 * fs ? 3 : 2;
  if (ImGui::BeginTable("##tensors", g_columns, tf)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("shape", ImGuiTableColumnFlags_WidthFixed);
    if (g_columns > 2) ImGui::TableSetupColumn("dtype", ImGuiTableColumnFlags_WidthFixed);
    if (g_columns > 3) ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthFixed);
    if (g_columns > 4) ImGui::TableSetupColumn("layout", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    if (app.filter[0]) {
      for (const auto& t : ts) {
        if (!contains_ci(t.name, app.filter)) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const std::string label =
            fit_text(t.name, ImGui::GetContentRegionAvail().x) + "###" + t.name;
        leaf_columns(app, t, label.c_str());
      }
    } else {
      for (const auto& [k, child] : root.kids) draw_node(app, k, child, ts);
    }
    ImGui::EndTable();
  }
  ImGui::EndDisabled();
  ImGui::End();
}

}  // namespace castscope::gui
