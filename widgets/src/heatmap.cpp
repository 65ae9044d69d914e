#include "castscope/widgets/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "castscope/widgets/grid_image.hpp"

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

const char* heat_unit(HeatField field) {
  switch (field) {
    case HeatField::ScaleLog2:
      return "log2 scale (exponent)";
    case HeatField::Absmax:
      return "tile absmax";
    case HeatField::Snr:
      return "tile SNR (dB)";
    case HeatField::Mapping:
      return "codebook mapping";
  }
  return "";
}

namespace {

float legend_lead() {  // the image's left margin, which the legends line up with
  return ImGui::CalcTextSize("000000").x + ImGui::GetFontSize() * 0.4f;
}

// The colour bar's unit goes beside the bar when the bar can keep 6 font sizes of width.
bool unit_beside_bar(HeatField field, float width) {
  const float fs = ImGui::GetFontSize();
  return width - legend_lead() - ImGui::CalcTextSize(heat_unit(field)).x - fs * 3 >= fs * 6;
}

// Swatch width of the mapping legend, and whether its caption fits beside the swatches.
float mapping_swatch(int n, float width, bool* beside) {
  const float fs = ImGui::GetFontSize();
  const float cw = std::max(3.0f, std::min(fs * 1.6f, (width - legend_lead()) / n));
  *beside =
      legend_lead() + cw * n + fs + ImGui::CalcTextSize(heat_unit(HeatField::Mapping)).x <= width;
  return cw;
}

// Height of the colour bar or mapping legend under the map.
float legend_height(const HeatmapState& s, const TileMap& m, float width) {
  const float fs = ImGui::GetFontSize();
  bool beside = true;
  if (s.field == HeatField::Mapping && !m.mapping.empty())
    mapping_swatch(1 + *std::max_element(m.mapping.begin(), m.mapping.end()), width, &beside);
  else
    beside = unit_beside_bar(s.field, width);
  return fs * 1.9f + (beside ? 0.0f : fs * 1.2f) + ImGui::GetStyle().ItemSpacing.y;
}

// A colour bar with nice ticks and the field's unit beside or under it.
void colour_bar(const HeatmapState& s, float width) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImVec2 c0 = ImGui::GetCursorScreenPos();
  const float lead = legend_lead();
  const char* unit = heat_unit(s.field);
  const ImVec2 us = ImGui::CalcTextSize(unit);
  const bool beside = unit_beside_bar(s.field, width);
  const float x0 = c0.x + lead, cw = beside
                                         ? std::min(width - lead - us.x - fs * 3, fs * 20)
                                         : std::max(fs * 3, std::min(width - lead - fs, fs * 20));
  const float bh = fs * 0.6f;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  for (int i = 0; i < 64; ++i)
    dl->AddRectFilled(ImVec2(x0 + cw * i / 64, c0.y), ImVec2(x0 + cw * (i + 1) / 64 + 1, c0.y + bh),
                      colormap(i / 63.0f));
  dl->AddRect(ImVec2(x0, c0.y), ImVec2(x0 + cw, c0.y + bh), ImGui::GetColorU32(ImGuiCol_Border));
  if (s.vmax > s.vmin) {
    const Ticks t = linear_ticks(s.vmin, s.vmax, std::max(2, static_cast<int>(cw / (fs * 3.5f))));
    for (size_t i = 0; i < t.values.size(); ++i) {
      const float x = x0 + static_cast<float>((t.values[i] - s.vmin) / (s.vmax - s.vmin)) * cw;
      const float w = ImGui::CalcTextSize(t.labels[i].c_str()).x;
      dl->AddLine(ImVec2(x, c0.y + bh), ImVec2(x, c0.y + bh + 3), text);
      dl->AddText(ImVec2(x - w / 2, c0.y + bh + 2), text, t.labels[i].c_str());
    }
  } else {
    const std::string l = tick_label(s.vmin, std::max(1e-6, std::fabs(s.vmin) * 1e-3));
    dl->AddText(ImVec2(x0 + cw / 2, c0.y + bh + 2), text, ("all " + l).c_str());
  }
  // The unit beside the bar when it fits, else under it.
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  float h = bh + fs * 1.3f;
  if (beside) {
    dl->AddText(ImVec2(x0 + cw + fs * 2, c0.y), dim, unit);
  } else {
    dl->AddText(ImVec2(x0, c0.y + h), dim, unit);
    h += fs * 1.2f;
  }
  ImGui::Dummy(ImVec2(width, h));
}

void mapping_legend(const TileMap& m, float width) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImVec2 c0 = ImGui::GetCursorScreenPos();
  const float lead = legend_lead();
  const int n = 1 + *std::max_element(m.mapping.begin(), m.mapping.end());
  // Swatches share the width; numbers every few swatches when they would not fit.
  bool beside = true;
  const float cw = mapping_swatch(n, width, &beside);
  const int every =
      std::max(1, static_cast<int>(std::ceil(ImGui::CalcTextSize("00").x * 1.3f / cw)));
  for (int i = 0; i < n; ++i) {
    const float x = c0.x + lead + cw * i;
    dl->AddRectFilled(ImVec2(x, c0.y), ImVec2(x + cw - 1, c0.y + fs * 0.6f), mapping_colour(i));
    if (i % every == 0)
      dl->AddText(ImVec2(x + 1, c0.y + fs * 0.6f + 1), ImGui::GetColorU32(ImGuiCol_Text),
                  std::to_string(i).c_str());
  }
  const char* unit = heat_unit(HeatField::Mapping);
  float h = fs * 1.9f;
  if (beside) {
    dl->AddText(ImVec2(c0.x + lead + cw * n + fs, c0.y), ImGui::GetColorU32(ImGuiCol_TextDisabled),
                unit);
  } else {
    dl->AddText(ImVec2(c0.x + lead, c0.y + h), ImGui::GetColorU32(ImGuiCol_TextDisabled), unit);
    h += fs * 1.2f;
  }
  ImGui::Dummy(ImVec2(width, h));
}

void tile_tooltip(const TileMap& m, size_t k, int64_t row, int64_t col, const GridHit& hit,
                  const GridImage& im, const GridView& view, const HeatmapExtras& x) {
  ImGui::BeginTooltip();
  ImGui::Text("tile #%zu  (tile row %lld, column %lld)", k, static_cast<long long>(row),
              static_cast<long long>(col));
  ImGui::Text("elements rows %lld..%lld, cols %lld..%lld",
              static_cast<long long>(row * m.tile_rows),
              static_cast<long long>(std::min(im.g.elem_rows, (row + 1) * m.tile_rows) - 1),
              static_cast<long long>(col * m.tile_cols),
              static_cast<long long>(std::min(im.g.elem_cols, (col + 1) * m.tile_cols) - 1));
  ImGui::Text("scale code 0x%X   value %.9g (2^%.6g)", m.scale_code[k], m.scale_value[k],
              m.scale_value[k] > 0 ? std::log2(m.scale_value[k]) : NAN);
  if (std::isfinite(x.tensor_scale))
    ImGui::Text("tensor scale %.9g   tile scale x tensor scale %.9g", x.tensor_scale,
                static_cast<double>(m.scale_value[k]) * x.tensor_scale);
  ImGui::Text("tile absmax %.9g", m.absmax[k]);
  if (std::isinf(m.snr_db[k]))
    ImGui::Text("tile SNR exact (no error)");
  else
    ImGui::Text("tile SNR %.4f dB", m.snr_db[k]);
  if (x.clipped && k < x.clipped->size())
    ImGui::Text("clipped elements %lld", static_cast<long long>((*x.clipped)[k]));
  else if (!x.clipped_note.empty())
    ImGui::TextDisabled("clipped per tile: %s", x.clipped_note.c_str());
  if (k < m.mapping.size()) {
    ImGui::Text("codebook mapping %d (most of its subtiles)", m.mapping[k]);
    if (m.subs_per_tile > 1) {
      std::string subs;
      for (int j = 0; j < m.subs_per_tile; ++j)
        subs += (j ? " " : "") + std::to_string(m.sub_mapping[k * m.subs_per_tile + j]);
      ImGui::Text("subtile mappings %s", subs.c_str());
    }
  }
  if (x.marks && k < x.marks->size())
    ImGui::Text("%s", (*x.marks)[k] ? "scale differs" : "same scale");
  if (grid_element_px_x(view, im.g) >= 4 && grid_element_px_y(view, im.g) >= 4) {
    if (hit.elem_row >= 0)
      ImGui::Text("element [%lld, %lld]", static_cast<long long>(hit.elem_row),
                  static_cast<long long>(hit.elem_col));
    else
      ImGui::TextDisabled("past the last element of this partial tile");
  }
  ImGui::TextDisabled("click: teaching view   wheel: zoom   drag: pan");
  ImGui::EndTooltip();
}

}  // namespace

int64_t draw_heatmap(const char* id, HeatmapState& s, const TileMap* m, const std::string& note,
                     ImVec2 size, const HeatmapExtras& extras) {
  ImGui::PushID(id);
  const float y_start = ImGui::GetCursorPosY();
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetContentRegionAvail().y;
  s.hovered = s.hover_row = s.hover_col = -1;
  if (!m || m->rows <= 0 || m->cols <= 0) {
    ImGui::TextWrapped("%s", note.empty() ? "no tile map" : note.c_str());
    ImGui::PopID();
    return -1;
  }
  const std::vector<uint8_t>* marks = extras.marks;
  if (s.source != m || s.built_field != s.field || s.marks_source != marks) rebuild(s, *m, marks);
  int f = static_cast<int>(s.field);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9);
  if (ImGui::Combo("##field", &f, "log2 scale\0tile absmax\0tile SNR (dB)\0codebook mapping\0"))
    s.field = static_cast<HeatField>(f);
  ImGui::SameLine();
  if (ImGui::SmallButton("reset view")) s.view = GridView{};
  {
    // The grid's size, shortened to what fits beside the buttons.
    const std::string grid = std::to_string(m->rows) + " x " + std::to_string(m->cols) + " tiles";
    const std::string full =
        grid + " of " + std::to_string(m->tile_rows) + " x " + std::to_string(m->tile_cols);
    ImGui::SameLine();
    const float room = ImGui::GetContentRegionAvail().x;
    const std::string& show = ImGui::CalcTextSize(full.c_str()).x <= room ? full : grid;
    if (ImGui::CalcTextSize(show.c_str()).x <= room)
      ImGui::TextDisabled("%s", show.c_str());
    else
      ImGui::NewLine();
  }
  if (!s.upload_error.empty()) {
    ImGui::TextWrapped("%s", s.upload_error.c_str());
    ImGui::PopID();
    return -1;
  }
  const float bar_h =
      marks ? 0.0f : legend_height(s, *m, size.x > 0 ? size.x : ImGui::GetContentRegionAvail().x);
  // size covers the header lines above too.
  size.x = std::max(size.x, 60.0f);
  size.y = std::max(size.y - bar_h - (ImGui::GetCursorPosY() - y_start), 40.0f);
  GridGeom g;
  g.rows = m->rows;
  g.cols = m->cols;
  g.cell_rows = m->tile_rows;
  g.cell_cols = m->tile_cols;
  // The elements end inside the last tiles when the shape is not a multiple of the tile; an
  // extent that does not fit this grid (another layout) is ignored.
  g.elem_rows = m->rows * m->tile_rows;
  g.elem_cols = m->cols * m->tile_cols;
  if (extras.elem_rows > g.elem_rows - m->tile_rows && extras.elem_rows <= g.elem_rows &&
      extras.elem_cols > g.elem_cols - m->tile_cols && extras.elem_cols <= g.elem_cols) {
    g.elem_rows = extras.elem_rows;
    g.elem_cols = extras.elem_cols;
  }
  const GridImage im = draw_grid_image("map", s.view, s.drag_px, s.tex, g, size);
  s.screen[0] = im.p0.x;
  s.screen[1] = im.p0.y;
  s.screen[2] = im.g.width;
  s.screen[3] = im.g.height;
  int64_t clicked = -1;
  if (im.hit) {
    const int64_t row = im.hit->row, col = im.hit->col;
    const size_t k = static_cast<size_t>(row * m->cols + col);
    s.hovered = static_cast<int64_t>(k);
    s.hover_row = im.hit->elem_row;
    s.hover_col = im.hit->elem_col;
    outline_cell(im, s.view, row, col, IM_COL32(255, 255, 255, 230));
    tile_tooltip(*m, k, row, col, *im.hit, im, s.view, extras);
    if (im.clicked) clicked = s.clicked = static_cast<int64_t>(k);
  }
  if (!marks && s.field == HeatField::Mapping && !m->mapping.empty())
    mapping_legend(*m, size.x);
  else if (!marks)
    colour_bar(s, size.x);
  ImGui::PopID();
  return clicked;
}

}  // namespace castscope::widgets
