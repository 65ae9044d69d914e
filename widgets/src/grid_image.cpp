#include "castscope/widgets/grid_image.hpp"

#include <algorithm>
#include <cmath>

namespace castscope::widgets {

namespace {

// Integer ticks over the visible elements [e0, e1).
Ticks element_ticks(double e0, double e1, float pixels, float label_px) {
  Ticks t = linear_ticks(e0, e1, std::max(2, static_cast<int>(pixels / label_px)));
  if (t.step < 1) {
    t = Ticks{};
    t.step = 1;
    for (double k = std::ceil(e0); k < e1; ++k) {
      t.values.push_back(k);
      t.labels.push_back(tick_label(k, 1));
    }
  }
  return t;
}

}  // namespace

GridImage draw_grid_image(const char* label, GridView& view, float& drag_px, const Texture& tex,
                          GridGeom g, ImVec2 size,
                          const std::function<void(ImDrawList*, const GridImage&)>& overlay) {
  GridImage im;
  const float fs = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  // Room for the row labels (up to 6 digits) on the left and the column labels below.
  const float left = ImGui::CalcTextSize("000000").x + fs * 0.4f, bottom = fs * 1.3f;
  g.width = std::max(16.0f, size.x - left);
  g.height = std::max(16.0f, size.y - bottom);
  im.p0 = ImVec2(origin.x + left, origin.y);
  ImGui::SetCursorScreenPos(im.p0);
  ImGui::InvisibleButton(label, ImVec2(g.width, g.height));
  const bool hovered = ImGui::IsItemHovered();
  ImGuiIO& io = ImGui::GetIO();
  grid_clamp(view, g);
  if (ImGui::IsItemActivated()) drag_px = 0;
  if (hovered && io.MouseWheel != 0)
    grid_zoom(view, g, io.MousePos.x - im.p0.x, io.MousePos.y - im.p0.y,
              std::pow(1.25, static_cast<double>(io.MouseWheel)));
  if (ImGui::IsItemActive()) {
    drag_px += std::fabs(io.MouseDelta.x) + std::fabs(io.MouseDelta.y);
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 0.0f))
      grid_pan(view, g, io.MouseDelta.x, io.MouseDelta.y);
  }
  im.clicked = ImGui::IsItemDeactivated() && hovered && drag_px < 4;
  if (hovered) im.hit = grid_hit(view, g, io.MousePos.x - im.p0.x, io.MousePos.y - im.p0.y);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p1(im.p0.x + g.width, im.p0.y + g.height);
  dl->AddRectFilled(im.p0, p1, ImGui::GetColorU32(ImGuiCol_FrameBg));
  if (tex.valid())
    dl->AddImage(tex.id(), im.p0, p1,
                 ImVec2(static_cast<float>(view.u0), static_cast<float>(view.v0)),
                 ImVec2(static_cast<float>(view.u0 + 1 / view.zx),
                        static_cast<float>(view.v0 + 1 / view.zy)));
  im.g = g;
  if (overlay) {
    dl->PushClipRect(im.p0, p1, true);
    overlay(dl, im);
    dl->PopClipRect();
  }
  // Tile lines, then element lines, once at least 6 px apart (at most a few hundred of each).
  dl->PushClipRect(im.p0, p1, true);
  auto lines = [&](double nx, double ny, ImU32 col) {  // divisions across the whole grid
    const double gx = g.width * view.zx / nx, gy = g.height * view.zy / ny;
    if (gx >= 6 && g.width / gx < 400) {
      const double c0 = std::floor(view.u0 * nx);
      for (double c = c0;; ++c) {
        const float x = static_cast<float>((c / nx - view.u0) * view.zx * g.width);
        if (x > g.width) break;
        dl->AddLine(ImVec2(im.p0.x + x, im.p0.y), ImVec2(im.p0.x + x, p1.y), col);
      }
    }
    if (gy >= 6 && g.height / gy < 400) {
      const double r0 = std::floor(view.v0 * ny);
      for (double r = r0;; ++r) {
        const float y = static_cast<float>((r / ny - view.v0) * view.zy * g.height);
        if (y > g.height) break;
        dl->AddLine(ImVec2(im.p0.x, im.p0.y + y), ImVec2(p1.x, im.p0.y + y), col);
      }
    }
  };
  lines(static_cast<double>(g.cols), static_cast<double>(g.rows), IM_COL32(0, 0, 0, 150));
  lines(static_cast<double>(g.cols * g.cell_cols), static_cast<double>(g.rows * g.cell_rows),
        IM_COL32(0, 0, 0, 60));
  dl->PopClipRect();
  dl->AddRect(im.p0, p1, ImGui::GetColorU32(ImGuiCol_Border));

  // Element-index axes over the visible window.
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const double ec = static_cast<double>(g.cols * g.cell_cols),
               er = static_cast<double>(g.rows * g.cell_rows);
  const double c0 = view.u0 * ec, c1 = (view.u0 + 1 / view.zx) * ec;
  const double r0 = view.v0 * er, r1 = (view.v0 + 1 / view.zy) * er;
  const Ticks tc =
      element_ticks(c0, std::min(c1, static_cast<double>(g.elem_cols)), g.width, fs * 5);
  for (size_t i = 0; i < tc.values.size(); ++i) {
    const float x = static_cast<float>(im.p0.x + (tc.values[i] - c0) / (c1 - c0) * g.width);
    const float w = ImGui::CalcTextSize(tc.labels[i].c_str()).x;
    dl->AddLine(ImVec2(x, p1.y), ImVec2(x, p1.y + 3), text);
    dl->AddText(ImVec2(std::clamp(x - w / 2, origin.x, p1.x - w), p1.y + 2), text,
                tc.labels[i].c_str());
  }
  const Ticks tr =
      element_ticks(r0, std::min(r1, static_cast<double>(g.elem_rows)), g.height, fs * 2.2f);
  for (size_t i = 0; i < tr.values.size(); ++i) {
    const float y = static_cast<float>(im.p0.y + (tr.values[i] - r0) / (r1 - r0) * g.height);
    const ImVec2 ts = ImGui::CalcTextSize(tr.labels[i].c_str());
    dl->AddLine(ImVec2(im.p0.x - 3, y), ImVec2(im.p0.x, y), text);
    dl->AddText(ImVec2(im.p0.x - ts.x - 4, std::clamp(y - ts.y / 2, im.p0.y, p1.y - ts.y)), text,
                tr.labels[i].c_str());
  }
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(size.x, g.height + bottom));
  im.g = g;
  return im;
}

void outline_cell(const GridImage& im, const GridView& view, int64_t row, int64_t col,
                  ImU32 color) {
  float x0, y0, x1, y1;
  grid_to_pixels(view, im.g, static_cast<double>(col), static_cast<double>(row), &x0, &y0);
  grid_to_pixels(view, im.g, static_cast<double>(col + 1), static_cast<double>(row + 1), &x1, &y1);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(im.p0, ImVec2(im.p0.x + im.g.width, im.p0.y + im.g.height), true);
  dl->AddRect(ImVec2(im.p0.x + x0, im.p0.y + y0),
              ImVec2(im.p0.x + std::max(x1, x0 + 2), im.p0.y + std::max(y1, y0 + 2)), color, 0, 0,
              2.0f);
  dl->PopClipRect();
}

}  // namespace castscope::widgets
