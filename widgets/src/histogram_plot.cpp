#include "castscope/widgets/histogram_plot.hpp"

#include <algorithm>
#include <cstdio>

namespace castscope::widgets {

namespace {

double yval(uint64_t c, bool log_y) {
  return log_y ? std::log10(1.0 + static_cast<double>(c)) : c;
}

}  // namespace

void draw_histogram(const char* id, const std::vector<HistSeries>& series, const HistPlotOptions& o,
                    ImVec2 size) {
  ImGui::PushID(id);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  if (size.x <= 0) size.x = ImGui::GetContentRegionAvail().x;
  if (size.y <= 0) size.y = ImGui::GetFontSize() * 10;
  size.x = std::max(size.x, 60.0f);
  size.y = std::max(size.y, 40.0f);
  ImGui::InvisibleButton("plot", size);
  const bool hovered = ImGui::IsItemHovered();
  const float fs = ImGui::GetFontSize();
  const ImVec2 a(p0.x + 2, p0.y + 2), b(p0.x + size.x - 2, p0.y + size.y - fs * 1.3f);
  const ImU32 frame = ImGui::GetColorU32(ImGuiCol_FrameBg);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 grid = ImGui::GetColorU32(ImGuiCol_Border);
  dl->AddRectFilled(p0, ImVec2(p0.x + size.x, p0.y + size.y), frame, 3.0f);

  size_t nb = 0;
  double ymax = 0;
  for (const HistSeries& s : series) {
    if (!s.counts) continue;
    nb = std::max(nb, s.counts->size());
    for (uint64_t c : *s.counts) ymax = std::max(ymax, yval(c, o.log_y));
  }
  if (nb == 0 || ymax <= 0) {
    dl->AddText(ImVec2(a.x + 6, a.y + 6), text, "no data");
    ImGui::PopID();
    return;
  }
  const double x_lo = o.x0, x_hi = o.x0 + o.dx * static_cast<double>(nb);
  auto X = [&](double x) {
    return static_cast<float>(a.x + (x - x_lo) / (x_hi - x_lo) * (b.x - a.x));
  };
  auto Y = [&](double y) { return static_cast<float>(b.y - y / (ymax * 1.08) * (b.y - a.y)); };

  if (std::isfinite(o.shade_lo) && std::isfinite(o.shade_hi)) {
    const float s0 = std::clamp(X(o.shade_lo), a.x, b.x), s1 = std::clamp(X(o.shade_hi), a.x, b.x);
    if (s1 > s0) {
      dl->AddRectFilled(ImVec2(s0, a.y), ImVec2(s1, b.y), IM_COL32(90, 200, 120, 48));
      dl->AddLine(ImVec2(s0, a.y), ImVec2(s0, b.y), IM_COL32(90, 200, 120, 160));
      dl->AddLine(ImVec2(s1, a.y), ImVec2(s1, b.y), IM_COL32(90, 200, 120, 160));
      if (!o.shade_label.empty()) {
        const ImVec2 ts = ImGui::CalcTextSize(o.shade_label.c_str());
        const float tx = std::clamp((s0 + s1 - ts.x) / 2, a.x + 2, b.x - ts.x - 2);
        dl->AddText(ImVec2(tx, b.y - ts.y - 2), IM_COL32(90, 200, 120, 255), o.shade_label.c_str());
      }
    }
  }
  // Zero line and a few x tick labels.
  if (x_lo < 0 && x_hi > 0) dl->AddLine(ImVec2(X(0), a.y), ImVec2(X(0), b.y), grid);
  for (int t = 0; t <= 4; ++t) {
    const double x = x_lo + (x_hi - x_lo) * t / 4.0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    const float w = ImGui::CalcTextSize(buf).x;
    const float px = std::clamp(X(x) - w / 2, a.x, b.x - w);
    dl->AddText(ImVec2(px, b.y + 2), text, buf);
    dl->AddLine(ImVec2(X(x), b.y), ImVec2(X(x), b.y + 3), grid);
  }

  for (const HistSeries& s : series) {
    if (!s.counts) continue;
    const std::vector<uint64_t>& c = *s.counts;
    if (s.filled) {
      for (size_t i = 0; i < c.size(); ++i) {
        if (!c[i]) continue;
        const float x0 = X(o.x0 + o.dx * i),
                    x1 = std::max(X(o.x0 + o.dx * (i + 1)) - 1.0f, x0 + 1.0f);
        dl->AddRectFilled(ImVec2(x0, Y(yval(c[i], o.log_y))), ImVec2(x1, b.y), s.color);
      }
    } else {
      ImVec2 prev(X(o.x0), b.y);
      for (size_t i = 0; i < c.size(); ++i) {
        const float y = Y(yval(c[i], o.log_y));
        const float x0 = X(o.x0 + o.dx * i), x1 = X(o.x0 + o.dx * (i + 1));
        dl->AddLine(prev, ImVec2(x0, y), s.color, 1.5f);
        dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), s.color, 1.5f);
        prev = ImVec2(x1, y);
      }
      dl->AddLine(prev, ImVec2(prev.x, b.y), s.color, 1.5f);
    }
  }
  // Legend, top right.
  float ly = a.y + 4;
  for (const HistSeries& s : series) {
    const float w = ImGui::CalcTextSize(s.label.c_str()).x;
    const float lx = b.x - w - fs * 1.6f;
    dl->AddRectFilled(ImVec2(lx, ly + fs * 0.25f), ImVec2(lx + fs * 0.8f, ly + fs * 0.85f),
                      s.color);
    dl->AddText(ImVec2(lx + fs * 1.1f, ly), text, s.label.c_str());
    ly += fs * 1.15f;
  }
  // Axis captions share the top-left corner, away from the legend and the shaded range label.
  std::string caption = o.x_label;
  if (o.log_y) caption += caption.empty() ? "log count" : "   (log count)";
  if (!caption.empty()) dl->AddText(ImVec2(a.x + 4, a.y + 2), text, caption.c_str());

  if (hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const double xm = x_lo + (m.x - a.x) / (b.x - a.x) * (x_hi - x_lo);
    const long bin = static_cast<long>(std::floor((xm - o.x0) / o.dx));
    if (bin >= 0 && bin < static_cast<long>(nb)) {
      const float x0 = X(o.x0 + o.dx * bin), x1 = X(o.x0 + o.dx * (bin + 1));
      dl->AddRectFilled(ImVec2(x0, a.y), ImVec2(x1, b.y), IM_COL32(255, 255, 255, 28));
      ImGui::BeginTooltip();
      const double lo = o.x0 + o.dx * bin, hi = lo + o.dx;
      if (o.x_is_log2)
        ImGui::Text("log2|x| in [%.6g, %.6g)  (|x| in [%.6g, %.6g))", lo, hi, std::exp2(lo),
                    std::exp2(hi));
      else
        ImGui::Text("bin %ld: [%.9g, %.9g)", bin, lo, hi);
      for (const HistSeries& s : series)
        if (s.counts && bin < static_cast<long>(s.counts->size()))
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(s.color | IM_COL32_A_MASK), "%s: %llu",
                             s.label.c_str(), static_cast<unsigned long long>((*s.counts)[bin]));
      ImGui::EndTooltip();
    }
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
