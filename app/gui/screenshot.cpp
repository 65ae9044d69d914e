// PNG screenshots of the window's framebuffer (stb_image_write from libstb), written atomically.
#include <GL/gl.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <string>
#include <vector>

#include "castscope/io.hpp"
#include "screenshot.hpp"

namespace castscope::gui {

void save_framebuffer_png(const std::string& path, int w, int h) {
  save_framebuffer_png(path, w, h, 0, 0, w, h);
}

void save_framebuffer_png(const std::string& path, int fw, int fh, int x, int y, int w, int h) {
  // Clip the rectangle to the framebuffer.
  const int x1 = std::min(fw, x + w), y1 = std::min(fh, y + h);
  x = std::max(0, x);
  y = std::max(0, y);
  w = x1 - x;
  h = y1 - y;
  if (w <= 0 || h <= 0) throw Error("screenshot '" + path + "': nothing visible to save");
  std::vector<unsigned char> px(static_cast<size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(x, fh - y - h, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  // OpenGL rows run bottom-up; PNG rows top-down. Alpha is forced opaque: the framebuffer's
  // alpha channel holds blending leftovers, not transparency.
  std::vector<unsigned char> flipped(px.size());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h; ++y) {
    std::copy_n(px.data() + (h - 1 - y) * row, row, flipped.data() + y * row);
    for (size_t x = 3; x < row; x += 4) flipped[y * row + x] = 255;
  }
  std::vector<unsigned char> png;
  auto sink = [](void* ctx, void* data, int size) {
    auto* out = static_cast<std::vector<unsigned char>*>(ctx);
    out->insert(out->end(), static_cast<unsigned char*>(data),
                static_cast<unsigned char*>(data) + size);
  };
  if (!stbi_write_png_to_func(sink, &png, w, h, 4, flipped.data(), static_cast<int>(row)))
    throw Error("screenshot '" + path + "': PNG encoding failed");
  io::write_atomically(path, [&](const auto& put) { put(png.data(), png.size()); });
}

}  // namespace castscope::gui
