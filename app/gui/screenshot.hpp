#pragma once

#include <string>

namespace castscope::gui {

// Reads the current back buffer (w x h) and writes it as a PNG. Throws Error on failure.
void save_framebuffer_png(const std::string& path, int w, int h);
// Only the rectangle (x, y, rw, rh), in framebuffer pixels from the top-left corner.
void save_framebuffer_png(const std::string& path, int w, int h, int x, int y, int rw, int rh);

}  // namespace castscope::gui
