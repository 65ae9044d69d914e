#include "castscope/widgets/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace castscope::widgets {

float heat_value(const TileMap& m, HeatField field, size_t k) {
  switch (field) {
    case HeatField::ScaleLog2: {
      const float v = m.scale_value[k];
      return v > 0 ? std::log2(v) : std::numeric_limits<float>::quiet_NaN();
    }
    case HeatField::Absmax:
      return m.absmax[k];
    case HeatField::Snr:
      return m.snr_db[k];
    case HeatField::Mapping:
      return k < m.mapping.size() ? static_cast<float>(m.mapping[k])
                                  : std::numeric_limits<float>::quiet_NaN();
  }
  return 0;
}

uint32_t mapping_colour(int index) {
  // Hues 0.618 apart (golden ratio) stay distinguishable for the 2 to 16 mappings of a codebook.
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(std::fmod(0.07f + 0.618034f * static_cast<float>(index), 1.0f), 0.65f,
                              0.95f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 1.0f));
}

void heat_range(const TileMap& m, HeatField field, float* lo, float* hi) {
  float a = std::numeric_limits<float>::infinity(), b = -a;
  for (size_t k = 0; k < m.scale_value.size(); ++k) {
    const float v = heat_value(m, field, k);
    if (!std::isfinite(v)) continue;
    a = std::min(a, v);
    b = std::max(b, v);
  }
  if (!(a <= b)) a = b = 0;
  *lo = a;
  *hi = b;
}

namespace {

void rebuild(HeatmapState& s, const TileMap& m, const std::vector<uint8_t>* marks) {
  heat_range(m, s.field, &s.vmin, &s.vmax);
  std::vector<uint32_t> px(static_cast<size_t>(m.rows * m.cols));
  const float span = s.vmax > s.vmin ? s.vmax - s.vmin : 1.0f;
  for (size_t k = 0; k < px.size(); ++k) {
    float v = heat_value(m, s.field, k);
    if (s.field == HeatField::Snr && std::isinf(v) && v > 0) v = s.vmax;  // exact tiles
    const float t = (v - s.vmin) / span;
    uint32_t c = s.field == HeatField::Mapping ? mapping_colour(static_cast<int>(v))
                                               : colormap(s.vmax > s.vmin ? t : 0.5f);
    if (!std::isfinite(v)) c = IM_COL32(128, 128, 128, 255);
    if (marks && k < marks->size()) {
      const ImVec4 f = ImGui::ColorConvertU32ToFloat4(c);
      const float g = 0.3f * f.x + 0.59f * f.y + 0.11f * f.z;
      c = (*marks)[k] ? IM_COL32(240, 70, 60, 255)
                      : ImGui::ColorConvertFloat4ToU32(ImVec4(g * 0.6f, g * 0.6f, g * 0.6f, 1.0f));
    }
    px[k] = c;
  }
  s.upload_error.clear();
  if (!s.tex.upload(px, static_cast<int>(m.cols), static_cast<int>(m.rows)))
    s.upload_error = "tile grid " + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                     " exceeds the GPU's texture size";
  s.source = &m;
  s.marks_source = marks;
  s.built_field = s.field;
}

}  // namespace

void draw_heatmap(const char* id, HeatmapState& s, const TileMap* m, const std::string& note,
                  ImVec2 size, const std::vector<uint8_t>* marks) {
  ImGui::PushID(id);
  if (!m || m->rows <= 0 || m->cols <= 0) {
    ImGui::TextWrapped("%s", note.empty() ? "no tile map" : note.c_str());
    ImGui::PopID();
    return;
  }
  if (s.source != m || s.built_field != s.field || s.marks_source != marks) rebuild(s, *m, marks);
  int f = static_cast<int>(s.field);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9);
  if (ImGui::Combo("##field", &f, "log2 scale\0tile absmax\0tile SNR (dB)\0codebook mapping\0"))
    s.field = static_cast<HeatField>(f);
  ImGui::SameLine();
  if (ImGui::SmallButton("reset view")) s.zoom = 1, s.u0 = s.v0 = 0;
  ImGui::Text("%lld x %lld tiles of %lld x %lld   range %.4g .. %.4g",
              static_cast<long long>(m->rows), static_cast<long long>(m->cols),
              static_cast<long long>(m->tile_rows), static_cast<long long>(m->tile_cols), s.vmin,
              s.vmax);
  if (!s.upload_error.empty()) {
    ImGui::TextWrapped("%s", s.upload_error.c_str());
    ImGui::PopID();
    return;
  }
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetContentRegionAvail().y;
  size.x = std::max(size.x, 40.0f);
  size.y = std::max(size.y, 40.0f);
  // Keep the tensor's aspect ratio (tiles may be 1 x 32 elements) inside the region.
  const double ew = static_cast<double>(m->cols * m->tile_cols),
               eh = static_cast<double>(m->rows * m->tile_rows);
  float w = size.x, h = static_cast<float>(size.x * eh / ew);
  if (h > size.y) h = size.y, w = static_cast<float>(size.y * ew / eh);
  w = std::max(w, 8.0f);
  h = std::max(h, 8.0f);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("map", ImVec2(w, h));
  const bool hovered = ImGui::IsItemHovered();
  ImGuiIO& io = ImGui::GetIO();
  const float vis = 1.0f / s.zoom;
  if (hovered && io.MouseWheel != 0) {
    const float mu = s.u0 + (io.MousePos.x - p0.x) / w * vis,
                mv = s.v0 + (io.MousePos.y - p0.y) / h * vis;
    s.zoom = std::clamp(s.zoom * (io.MouseWheel > 0 ? 1.25f : 0.8f), 1.0f, 512.0f);
    const float nv = 1.0f / s.zoom;
    s.u0 = mu - (io.MousePos.x - p0.x) / w * nv;
    s.v0 = mv - (io.MousePos.y - p0.y) / h * nv;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 0.0f)) {
    s.u0 -= io.MouseDelta.x / w * vis;
    s.v0 -= io.MouseDelta.y / h * vis;
  }
  const float nv = 1.0f / s.zoom;
  s.u0 = std::clamp(s.u0, 0.0f, 1.0f - nv);
  s.v0 = std::clamp(s.v0, 0.0f, 1.0f - nv);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddImage(s.tex.id(), p0, ImVec2(p0.x + w, p0.y + h), ImVec2(s.u0, s.v0),
               ImVec2(s.u0 + nv, s.v0 + nv));
  dl->AddRect(p0, ImVec2(p0.x + w, p0.y + h), ImGui::GetColorU32(ImGuiCol_Border));
  if (hovered) {
    const float u = s.u0 + (io.MousePos.x - p0.x) / w * nv,
                v = s.v0 + (io.MousePos.y - p0.y) / h * nv;
    const int64_t col = std::clamp<int64_t>(static_cast<int64_t>(u * m->cols), 0, m->cols - 1);
    const int64_t row = std::clamp<int64_t>(static_cast<int64_t>(v * m->rows), 0, m->rows - 1);
    const size_t k = static_cast<size_t>(row * m->cols + col);
    ImGui::BeginTooltip();
    ImGui::Text("tile (%lld, %lld)  #%zu", static_cast<long long>(row), static_cast<long long>(col),
                k);
    ImGui::Text("elements rows %lld..%lld, cols %lld..%lld",
                static_cast<long long>(row * m->tile_rows),
                static_cast<long long>((row + 1) * m->tile_rows - 1),
                static_cast<long long>(col * m->tile_cols),
                static_cast<long long>((col + 1) * m->tile_cols - 1));
    ImGui::Text("scale code 0x%X  value %.9g", m->scale_code[k], m->scale_value[k]);
    ImGui::Text("tile absmax %.9g", m->absmax[k]);
    if (std::isinf(m->snr_db[k]))
      ImGui::Text("tile SNR exact (no error)");
    else
      ImGui::Text("tile SNR %.4f dB", m->snr_db[k]);
    if (k < m->mapping.size()) {
      ImGui::Text("codebook mapping %d (most of its subtiles)", m->mapping[k]);
      if (m->subs_per_tile > 1) {
        std::string subs;
        for (int j = 0; j < m->subs_per_tile; ++j)
          subs += (j ? " " : "") + std::to_string(m->sub_mapping[k * m->subs_per_tile + j]);
        ImGui::Text("subtile mappings %s", subs.c_str());
      }
    }
    if (marks && k < marks->size()) ImGui::Text("%s", (*marks)[k] ? "scale differs" : "same scale");
    ImGui::EndTooltip();
  }
  // Colour bar (a legend of mapping colours for the codebook field).
  if (!marks && s.field == HeatField::Mapping && !m->mapping.empty()) {
    const ImVec2 c0(p0.x, p0.y + h + 4);
    const float cw = ImGui::GetFontSize() * 1.2f;
    const int n = 1 + *std::max_element(m->mapping.begin(), m->mapping.end());
    for (int i = 0; i < n; ++i)
      dl->AddRectFilled(ImVec2(c0.x + cw * i, c0.y), ImVec2(c0.x + cw * (i + 1) - 1, c0.y + 8),
                        mapping_colour(i));
    ImGui::Dummy(ImVec2(w, 10));
  } else if (!marks) {
    const ImVec2 c0(p0.x, p0.y + h + 4);
    const float cw = std::min(w, ImGui::GetFontSize() * 16);
    for (int i = 0; i < 64; ++i)
      dl->AddRectFilled(ImVec2(c0.x + cw * i / 64, c0.y),
                        ImVec2(c0.x + cw * (i + 1) / 64 + 1, c0.y + 8), colormap(i / 63.0f));
    ImGui::Dummy(ImVec2(w, 10));
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
