// Composer panel: the datatype composer widget; a change restarts the analysis.
#include <imgui.h>

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
  if (widgets::draw_composer(app.composer)) app.recompute = true;
  if (app.analysis && app.analysis->dtype == app.composer.dtype) {
    ImGui::Separator();
    ImGui::Text("on %s %s: %.4g bits per value", app.analysis->tensor.c_str(),
                shape_str(app.analysis->shape).c_str(), app.analysis->bits_per_value);
  }
  ImGui::End();
}

}  // namespace castscope::gui
