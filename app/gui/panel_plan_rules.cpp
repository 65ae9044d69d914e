// The plan panel's rule editor: every rule of the plan as a row of widgets (pattern, datatype,
// quantization axis or layout override, the weights-only box, order, delete), a row that adds a
// rule, and the default datatype. Every edit goes through the plan's JSON, so the app's plan is
// always one the CLI reads (a bad pattern or datatype is reported and the plan stays as it was).
#include <imgui.h>

#include <cstdio>
#include <string>

#include "panels.hpp"

namespace castscope::gui {
namespace {

// Axis overrides offered by name: the conventions of docs/formats.md ("Resolved layouts").
// Any other value comes from a plan file and is shown as it is.
struct AxisChoice {
  const char* value;  // "" : the rule names no axis (the export's / composer's applies)
  const char* label;
};
constexpr AxisChoice kAxes[] = {
    {"", "none     the export's axis (composer's in the app)"},
    {"auto", "auto     the tensor's resolved layout"},
    {"-1", "-1       last axis: linear [out, in], Gemm transB"},
    {"0", "0        first axis: MatMul B [K, N], dense [in, out]"},
    {"1:", "1:       conv [O, I/g, k...] over I/g*k"},
    {":0", ":0       conv-transpose [Cin, Cout/g, k...] over Cin"},
    {":1", ":1       Keras conv1d [k, Cin, Cout] over k*Cin"},
    {":2", ":2       Keras conv2d [kh, kw, Cin, Cout] over kh*kw*Cin"},
    {"-2", "-2       experts [E, in, out] over in"},
};

const char* kAxisOnly = "axis only";

std::string axis_text(const PlanRule& r) {
  return r.axis ? r.axis->str() : std::string();
}

// Applies `edit` to a copy of the plan and takes it only if it reads back as a plan.
template <class F>
void edit_plan(AppState& app, const char* what, F edit) {
  ExportPlan p = app.plan;
  edit(p);
  try {
    app.plan = parse_plan(plan_to_json(p), "plan");
  } catch (const Error& e) {
    app.note(std::string(what) + ": " + e.what());
  }
}

// Sets a rule's datatype text: "keep", "axis only" or a datatype (parsed by edit_plan).
void set_dtype(PlanRule& r, const std::string& d) {
  if (d == kAxisOnly) {
    r.axis_only = true;
    r.dtype.clear();
    r.target.reset();
    r.rotate = Rotation{};
    if (!r.axis) r.axis = AxisSpec::parse("auto");
    return;
  }
  r.axis_only = false;
  r.dtype = d;
  r.target.reset();
  if (d != "keep") r.target = DataType::parse(d);
}

// A combo of "keep", optionally "axis only", and the registry; true with `out` set on a pick.
bool dtype_combo(const char* id, const std::string& current, bool axis_only_item,
                 std::string& out) {
  bool picked = false;
  if (ImGui::BeginCombo(id, current.c_str())) {
    if (ImGui::Selectable("keep", current == "keep")) out = "keep", picked = true;
    if (axis_only_item && ImGui::Selectable(kAxisOnly, current == kAxisOnly))
      out = kAxisOnly, picked = true;
    if (const RegistryEntry* e = widgets::registry_items(current, false))
      out = e->name, picked = true;
    ImGui::EndCombo();
  }
  return picked;
}

// A combo of kAxes; true with `out` set ("" : none) on a pick. `allow_none` false hides "none".
bool axis_combo(const char* id, const std::string& current, bool allow_none, std::string& out) {
  bool picked = false;
  const std::string preview = current.empty() ? std::string("none") : current;
  if (ImGui::BeginCombo(id, preview.c_str())) {
    for (const AxisChoice& c : kAxes) {
      if (!allow_none && !*c.value) continue;
      if (ImGui::Selectable(c.label, current == c.value)) out = c.value, picked = true;
    }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Quantization axis of the rule's tensors (docs/formats.md): auto takes each tensor's "
        "resolved layout; a named axis or layout overrides it");
  return picked;
}

}  // namespace

void draw_plan_rules(AppState& app) {
  if (!ImGui::TreeNode("rules", "Rules (%zu, first match wins; default %s)", app.plan.rules.size(),
                       app.plan.default_text.c_str()))
    return;
  const float em = ImGui::GetFontSize();
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("default (unmatched weights)");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(em * 9);
  std::string picked;
  const std::string default_shown =
      app.plan.default_dtype && !app.plan.default_dtype->name().empty()
          ? app.plan.default_dtype->name()
          : app.plan.default_text;
  if (dtype_combo("##plan_default", default_shown, false, picked))
    edit_plan(app, "default not set", [&](ExportPlan& p) {
      p.default_text = picked;
      p.default_dtype.reset();
      if (picked != "keep") p.default_dtype = DataType::parse(picked);
    });
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Datatype of every weight (rank 2 or more, not an embedding) that no rule matches; 1-D "
        "tensors and embeddings stay as stored unless a rule names them");

  // A per-tensor override starts from the tensor selected in the browser: its exact name, glob
  // metacharacters as one-character classes (as auto-assign writes them).
  ImGui::SameLine();
  ImGui::BeginDisabled(app.selected.empty());
  if (ImGui::Button("Selected tensor")) {
    std::string pat;
    for (char c : app.selected)
      pat += (c == '*' || c == '?' || c == '[') ? std::string("[") + c + "]" : std::string(1, c);
    std::snprintf(app.rule_new_pattern, sizeof app.rule_new_pattern, "%s", pat.c_str());
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("the new rule's pattern: the tensor selected in the browser, by its name");

  int remove = -1, up = -1, down = -1;
  const ImGuiTableFlags tf =
      ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("##rule_table", 5, tf)) {
    ImGui::TableSetupColumn("order", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("pattern", ImGuiTableColumnFlags_WidthStretch, 1.6f);
    ImGui::TableSetupColumn("datatype", ImGuiTableColumnFlags_WidthStretch, 1.0f);
    ImGui::TableSetupColumn("axis / layout", ImGuiTableColumnFlags_WidthStretch, 0.8f);
    ImGui::TableSetupColumn("weights", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    char id[64];
    for (size_t i = 0; i < app.plan.rules.size(); ++i) {
      const PlanRule r = app.plan.rules[i];  // a copy: an edit below replaces the plan
      ImGui::PushID(static_cast<int>(i));
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      // Unique labels per row, so a script (and a person reading the state) names each widget.
      if (ImGui::SmallButton("x")) remove = static_cast<int>(i);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("delete this rule");
      ImGui::SameLine();
      std::snprintf(id, sizeof id, "##rule_up%zu", i);
      ImGui::BeginDisabled(i == 0);
      if (ImGui::ArrowButton(id, ImGuiDir_Up)) up = static_cast<int>(i);
      ImGui::EndDisabled();
      ImGui::SameLine();
      std::snprintf(id, sizeof id, "##rule_down%zu", i);
      ImGui::BeginDisabled(i + 1 == app.plan.rules.size());
      if (ImGui::ArrowButton(id, ImGuiDir_Down)) down = static_cast<int>(i);
      ImGui::EndDisabled();

      ImGui::TableNextColumn();
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s", r.pattern.c_str());
      std::snprintf(id, sizeof id, "##rule_pattern%zu", i);
      ImGui::SetNextItemWidth(-FLT_MIN);
      if (ImGui::InputText(id, buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue) && *buf) {
        const std::string pat = buf;
        edit_plan(app, "pattern not changed", [&](ExportPlan& p) { p.rules[i].pattern = pat; });
      }
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "glob over the whole name, or re:REGEX; press Enter to apply%s",
            r.rank >= 0 ? ("\nonly tensors of rank " + std::to_string(r.rank)).c_str() : "");

      ImGui::TableNextColumn();
      std::snprintf(id, sizeof id, "##rule_dtype%zu", i);
      ImGui::SetNextItemWidth(-FLT_MIN);
      // A registry datatype by its name (the plan stores the canonical string).
      const std::string shown = r.axis_only                             ? std::string(kAxisOnly)
                                : r.target && !r.target->name().empty() ? r.target->name()
                                                                        : r.dtype;
      if (dtype_combo(id, shown, true, picked))
        edit_plan(app, "datatype not changed",
                  [&](ExportPlan& p) { set_dtype(p.rules[i], picked); });
      if (r.rotate.enabled() && ImGui::IsItemHovered())
        ImGui::SetTooltip("rotated by %s before the cast", r.rotate.str().c_str());

      ImGui::TableNextColumn();
      std::snprintf(id, sizeof id, "##rule_axis%zu", i);
      ImGui::SetNextItemWidth(-FLT_MIN);
      if (axis_combo(id, axis_text(r), !r.axis_only, picked))
        edit_plan(app, "axis not changed", [&](ExportPlan& p) {
          if (picked.empty())
            p.rules[i].axis.reset();
          else
            p.rules[i].axis = AxisSpec::parse(picked);
        });

      ImGui::TableNextColumn();
      bool w = r.weights;
      std::snprintf(id, sizeof id, "##rule_weights%zu", i);
      if (ImGui::Checkbox(id, &w))
        edit_plan(app, "rule not changed", [&](ExportPlan& p) { p.rules[i].weights = w; });
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("only weights: rank 2 or more, not embeddings");
      ImGui::PopID();
    }

    // The row that adds a rule: first in the list, as Assign does (the newest intent wins).
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool can_add = app.rule_new_pattern[0] != 0;
    ImGui::BeginDisabled(!can_add);
    const bool add = ImGui::SmallButton("Add rule");
    ImGui::EndDisabled();
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    ImGui::InputTextWithHint("##rule_new_pattern", "pattern of a new rule", app.rule_new_pattern,
                             sizeof app.rule_new_pattern);
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    if (dtype_combo("##rule_new_dtype", app.rule_new_dtype, true, picked)) {
      app.rule_new_dtype = picked;
      if (picked == kAxisOnly && app.rule_new_axis.empty()) app.rule_new_axis = "auto";
    }
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    if (axis_combo("##rule_new_axis", app.rule_new_axis, app.rule_new_dtype != kAxisOnly, picked))
      app.rule_new_axis = picked;
    ImGui::TableNextColumn();
    ImGui::Checkbox("##rule_new_weights", &app.rule_new_weights);
    if (add && can_add) {
      edit_plan(app, "rule not added", [&](ExportPlan& p) {
        PlanRule r;
        r.pattern = app.rule_new_pattern;
        set_dtype(r, app.rule_new_dtype);
        if (!app.rule_new_axis.empty()) r.axis = AxisSpec::parse(app.rule_new_axis);
        r.weights = app.rule_new_weights;
        p.rules.insert(p.rules.begin(), r);
      });
    }
    ImGui::EndTable();
  }
  if (remove >= 0)
    edit_plan(app, "rule not removed",
              [&](ExportPlan& p) { p.rules.erase(p.rules.begin() + remove); });
  if (up > 0)
    edit_plan(app, "rule not moved",
              [&](ExportPlan& p) { std::swap(p.rules[up - 1], p.rules[up]); });
  if (down >= 0 && down + 1 < static_cast<int>(app.plan.rules.size()))
    edit_plan(app, "rule not moved",
              [&](ExportPlan& p) { std::swap(p.rules[down], p.rules[down + 1]); });
  ImGui::TreePop();
}

}  // namespace castscope::gui
