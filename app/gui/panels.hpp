// One function per panel (each in its own file); all take the app state and draw into their
// own window.
#pragma once

#include "app_state.hpp"

namespace castscope::gui {

void draw_menu_bar(AppState& app);
void draw_status_bar(AppState& app);
void draw_files_panel(AppState& app);
void draw_tensors_panel(AppState& app);
void draw_composer_panel(AppState& app);
void draw_views_panel(AppState& app);

// Places a panel's window at its default spot (fractions of the display) the first time, or
// every frame of a scripted session so screenshots are reproducible; brings it to front when
// the app asks.
bool begin_panel(AppState& app, PanelId id, const char* title, float x, float y, float w, float h,
                 ImGuiWindowFlags flags = 0);

// Formats a byte count as "12.3 MiB".
std::string human_bytes(double bytes);

}  // namespace castscope::gui
