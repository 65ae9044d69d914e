#pragma once

#include <string>

namespace castscope::gui {

// Reads the current back buffer (w x h) and writes it as a PNG. Throws Error on failure.
void save_framebuffer_png(const std::string& path, int w, int h);

}  // namespace castscope::gui
