// Composer panel: the datatype composer widget; a change restarts the analysis.
#include <imgui.h>
#include <imgui_internal.h>

#include "panels.hpp"

namespace castscope::gui {

void draw_composer_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Composer, "Datatype", 0.22f, 0.0f, 0.25f, 1.0f)) return;
  if (app.focus_dtype) {
    ImGui::SetKeyboardFocusHere(1);  // the string box follows the presets combo
    app.focus_dtype = false;
  }
  // Loading a tensor replaces the input under the composer: hold edits until it is in.
  app.composer.disabled = app.loader.running();
  // The storage figure on the loaded tensor, under the datatype's nominal one; that one only
  // labelled, where the tensor's rows change it.
  app.composer.tensor_bits.clear();
  app.composer.tensor_bits_note.clear();
  if (app.analysis && app.analysis->dtype == app.composer.dtype) {
    const widgets::Analysis& an = *app.analysis;
    const std::string bits = widgets::bits_label(an.bits_per_value, an.nominal_bits, an.row_length);
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.4g", an.bits_per_value);
    app.composer.tensor_bits =
        "on " + an.tensor + " " + shape_str(an.shape) + ": " + figure + " bits per value";
    if (bits != figure) app.composer.tensor_bits_note = bits;
  }
  // Fields leave room for the widest label beside them, so that a scroll bar taking its width
  // off a long composer narrows the fields, not their labels.
  ImGui::PushItemWidth(
      -(ImGui::CalcTextSize("exponent bits").x + ImGui::GetStyle().ItemInnerSpacing.x * 2));
  if (widgets::draw_composer(app.composer)) app.recompute = true;
  ImGui::PopItemWidth();
  // A rejected string and its error stay while the person is on it; once another change has
  // produced new views the box shows the datatype in force again.
  if (app.composer.error.empty()) {
    app.composer_error_since = -1;
  } else if (app.composer_error_since < 0) {
    app.composer_error_since = static_cast<int64_t>(app.analyses_done);
  } else if (static_cast<int64_t>(app.analyses_done) > app.composer_error_since &&
             ImGui::GetActiveID() == 0) {
    app.composer.set(app.composer.dtype);
    app.composer_error_since = -1;
  }
  // A block Hadamard rotation before the cast (inverted after), so every view shows its effect.
  ImGui::Separator();
  ImGui::BeginDisabled(app.composer.disabled);
  const char* sizes[] = {"none", "16", "32", "64", "128", "256"};
  int sel = 0;
  for (int i = 1; i < 6; ++i)
    if (app.view_rotate == (8 << i)) sel = i;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  if (ImGui::Combo("Hadamard rotation", &sel, sizes, 6)) {
    app.view_rotate = sel ? (8 << sel) : 0;
    app.recompute = true;
  }
  if (app.view_rotate) {
    if (ImGui::Checkbox("random signs", &app.view_signs)) app.recompute = true;
    if (app.view_signs) {
      ImGui::SameLine();
      ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
      if (ImGui::InputInt("seed##rot", &app.view_seed, 0)) app.recompute = true;
    }
    ImGui::TextDisabled("tile scales in the heatmap are those of the rotated tensor");
  }
  ImGui::EndDisabled();
  ImGui::Separator();
  draw_method_controls(app);
  if (app.analysis && app.analysis->dtype == app.composer.dtype) {
    ImGui::Separator();
    // The axis in use on this tensor: "1..3:147" is axes 1 to 3 flattened, 147 values a row.
    // The axis comes from the tensor's resolved layout unless one is set here; a layout that
    // nothing in the file showed says so beside the figures, the layout and why on hover.
    const io::TensorInfo* info = nullptr;
    if (app.model)
      for (const io::TensorInfo& t : app.model->tensors())
        if (t.name == app.analysis->tensor) info = &t;
    const bool guessed =
        info && app.composer.axis.automatic && info->layout.guessed && info->shape.size() >= 2;
    const std::string how = !app.composer.axis.automatic    ? app.composer.axis.str() + ", set here"
                            : guessed                       ? std::string("layout guessed")
                            : info && !info->layout.empty() ? info->layout.layout
                                                            : std::string("auto");
    if (guessed) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.75f, 0.3f, 1));
    ImGui::TextWrapped("quantization axis %s (%s)", app.analysis->axis.c_str(), how.c_str());
    if (guessed) ImGui::PopStyleColor();
    if (info && !info->layout.empty() && ImGui::IsItemHovered())
      ImGui::SetTooltip("%s", describe_layout(info->layout, info->shape).c_str());
  }
  ImGui::End();
}

}  // namespace castscope::gui
