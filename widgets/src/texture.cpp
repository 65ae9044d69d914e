#include "castscope/widgets/texture.hpp"

#include <GL/gl.h>

#include <algorithm>
#include <cmath>

namespace castscope::widgets {

Texture::~Texture() {
  if (id_) glDeleteTextures(1, &id_);
}

bool Texture::upload(const std::vector<uint32_t>& rgba, int w, int h) {
  GLint max_size = 0;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_size);
  if (w <= 0 || h <= 0 || w > max_size || h > max_size ||
      rgba.size() < static_cast<size_t>(w) * static_cast<size_t>(h))
    return false;
  if (!id_) glGenTextures(1, &id_);
  glBindTexture(GL_TEXTURE_2D, id_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  w_ = w;
  h_ = h;
  return true;
}

uint32_t colormap(float t) {
  // Stops roughly following viridis: distinguishable in both themes and for colour-blind readers.
  static const float stops[][3] = {{0.27f, 0.00f, 0.33f},
                                   {0.23f, 0.32f, 0.55f},
                                   {0.13f, 0.57f, 0.55f},
                                   {0.37f, 0.79f, 0.38f},
                                   {0.99f, 0.91f, 0.15f}};
  if (!std::isfinite(t)) return IM_COL32(128, 128, 128, 255);
  t = std::clamp(t, 0.0f, 1.0f) * 4.0f;
  const int i = std::min(3, static_cast<int>(t));
  const float f = t - i;
  auto ch = [&](int c) {
    return static_cast<int>(255.0f * (stops[i][c] + f * (stops[i + 1][c] - stops[i][c])) + 0.5f);
  };
  return IM_COL32(ch(0), ch(1), ch(2), 255);
}

}  // namespace castscope::widgets
