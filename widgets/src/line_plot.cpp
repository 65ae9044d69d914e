#include "castscope/widgets/line_plot.hpp"

#include <algorithm>
#include <cmath>

#include "plot_frame.hpp"

namespace castscope::widgets {

void draw_line_plot(const char* id, const std::vector<float>& y, const LinePlotOptions& o,
                    ImVec2 size) {
  const auto [dl, p0, frame_size, hovered, active, fs] = begin_plot(id, size, 60.0f, false);
  size = frame_size;
  const float pad = fs * 0.3f;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 axis = ImGui::GetColorU32(ImGuiCol_Border);
  ImVec4 gc = ImGui::GetStyleColorVec4(ImGuiCol_Border);
  gc.w *= 0.45f;
  const ImU32 grid = ImGui::GetColorU32(gc);
  if (y.empty()) {
    dl->AddText(ImVec2(p0.x + 6, p0.y + 6), text, "no data");
    ImGui::PopID();
    return;
  }
  AxisView local;
  AxisView& view = o.view ? *o.view : local;
  axis_fit(view, 0, static_cast<double>(y.size()));
  const size_t i0 = static_cast<size_t>(std::max(0.0, std::floor(view.lo)));
  const size_t i1 = std::min(y.size(), static_cast<size_t>(std::ceil(view.hi)) + 1);
  float ylo = INFINITY, yhi = -INFINITY;
  for (size_t i = i0; i < i1; ++i)
    if (std::isfinite(y[i])) ylo = std::min(ylo, y[i]), yhi = std::max(yhi, y[i]);
  if (!(ylo <= yhi)) ylo = 0, yhi = 1;
  if (ylo > 0 && ylo < 0.5f * yhi) ylo = 0;  // show the zero line when it is near
  if (yhi - ylo <= 0) yhi = ylo + (ylo != 0 ? std::fabs(ylo) * 0.1f : 1.0f);
  const double top = yhi + 0.06 * (yhi - ylo);
  const Ticks yt = linear_ticks(ylo, top, std::max(2, static_cast<int>(size.y / (fs * 2.2f))));
  float ylab = 0;
  for (const std::string& l : yt.labels) ylab = std::max(ylab, ImGui::CalcTextSize(l.c_str()).x);
  const ImVec2 a(p0.x + pad + ylab + fs * 0.5f, p0.y + pad + fs * 1.3f),
      b(p0.x + size.x - pad - fs * 0.5f, p0.y + size.y - pad - fs * 2.3f);
  if (!set_plot_area(view, a, b, fs)) {
    ImGui::PopID();
    return;
  }
  auto X = [&](double x) {
    return static_cast<float>(a.x + (x - view.lo) / (view.hi - view.lo) * (b.x - a.x));
  };
  auto Y = [&](double v) {
    return static_cast<float>(b.y - (v - ylo) / (top - ylo) * (b.y - a.y));
  };
  ImGuiIO& io = ImGui::GetIO();
  const double xm = view.lo + (io.MousePos.x - a.x) / (b.x - a.x) * (view.hi - view.lo);
  if (hovered && io.MouseWheel != 0)
    axis_zoom(view, xm, std::pow(1.25, static_cast<double>(io.MouseWheel)));
  if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f) && io.MouseDelta.x != 0)
    axis_pan(view, -io.MouseDelta.x / (b.x - a.x) * (view.hi - view.lo));
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) axis_reset(view);

  for (size_t i = 0; i < yt.values.size(); ++i) {
    const float py = Y(yt.values[i]);
    dl->AddLine(ImVec2(a.x, py), ImVec2(b.x, py), grid);
    const ImVec2 ts = ImGui::CalcTextSize(yt.labels[i].c_str());
    dl->AddText(ImVec2(a.x - ts.x - fs * 0.3f, py - ts.y / 2), text, yt.labels[i].c_str());
  }
  Ticks xt = linear_ticks(view.lo, view.hi, std::max(2, static_cast<int>((b.x - a.x) / (fs * 5))));
  if (xt.step < 1)
    xt = linear_ticks(view.lo, view.hi, std::max(1, static_cast<int>(view.hi - view.lo)));
  for (size_t i = 0; i < xt.values.size(); ++i) {
    const float px = X(xt.values[i]);
    dl->AddLine(ImVec2(px, a.y), ImVec2(px, b.y), grid);
    const float w = ImGui::CalcTextSize(xt.labels[i].c_str()).x;
    dl->AddText(ImVec2(std::clamp(px - w / 2, p0.x + pad, p0.x + size.x - pad - w), b.y + 4), text,
                xt.labels[i].c_str());
  }
  dl->AddText(ImVec2(p0.x + pad, p0.y + pad), dim, o.y_label.c_str());
  std::string cap = o.x_label;
  if (view.zoomed()) cap += "   (zoomed: double-click to reset)";
  const float cw = ImGui::CalcTextSize(cap.c_str()).x;
  dl->AddText(ImVec2((a.x + b.x - cw) / 2, b.y + 4 + fs * 1.1f), dim, cap.c_str());

  dl->PushClipRect(a, ImVec2(b.x + 1, b.y + 1), true);
  // One point per element at the centre of its unit; many points per pixel draw as a min-max
  // band so no spike is lost.
  const float ppx = static_cast<float>((b.x - a.x) / (view.hi - view.lo));
  if (ppx >= 1) {
    for (size_t i = i0; i + 1 < i1; ++i)
      if (std::isfinite(y[i]) && std::isfinite(y[i + 1]))
        dl->AddLine(ImVec2(X(i + 0.5), Y(y[i])), ImVec2(X(i + 1.5), Y(y[i + 1])), o.color, 1.5f);
  } else {
    for (float px = a.x; px < b.x; px += 1) {
      const size_t j0 = static_cast<size_t>(std::max(0.0, view.lo + (px - a.x) / ppx));
      const size_t j1 = std::min(y.size(), static_cast<size_t>(view.lo + (px + 1 - a.x) / ppx) + 1);
      float lo = INFINITY, hi = -INFINITY;
      for (size_t j = j0; j < j1; ++j)
        if (std::isfinite(y[j])) lo = std::min(lo, y[j]), hi = std::max(hi, y[j]);
      if (lo <= hi) dl->AddLine(ImVec2(px, Y(lo)), ImVec2(px, Y(hi) - 1), o.color);
    }
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, b.y), axis);
  dl->AddLine(ImVec2(a.x, a.y), ImVec2(a.x, b.y), axis);
  if (hovered && io.MousePos.x >= a.x && io.MousePos.x <= b.x) {
    const long i = static_cast<long>(std::floor(xm));
    if (i >= 0 && i < static_cast<long>(y.size())) {
      dl->AddLine(ImVec2(X(i + 0.5), a.y), ImVec2(X(i + 0.5), b.y), IM_COL32(255, 255, 255, 60));
      ImGui::SetTooltip("%s %ld: %.6g\nwheel: zoom   drag: pan   double-click: whole range",
                        o.x_label.c_str(), i, static_cast<double>(y[i]));
    }
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
