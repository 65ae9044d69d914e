// An RGBA OpenGL texture owned by a widget (created and used on the GL thread only), and the
// colour map the image widgets share.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <vector>

namespace castscope::widgets {

class Texture {
 public:
  Texture() = default;
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  ~Texture();
  // Uploads w x h RGBA pixels (ImGui's IM_COL32 byte order), drawn with nearest filtering so
  // each tile stays a crisp block. Returns false when the size exceeds the GL limit.
  bool upload(const std::vector<uint32_t>& rgba, int w, int h);
  ImTextureID id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(id_)); }
  bool valid() const { return id_ != 0 && w_ > 0 && h_ > 0; }
  int width() const { return w_; }
  int height() const { return h_; }

 private:
  unsigned id_ = 0;
  int w_ = 0, h_ = 0;
};

// t in [0, 1] -> a perceptually ordered dark-blue .. yellow ramp (IM_COL32 packing).
uint32_t colormap(float t);

}  // namespace castscope::widgets
