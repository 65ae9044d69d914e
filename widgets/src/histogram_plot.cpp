#include "castscope/widgets/histogram_plot.hpp"

#include <algorithm>
#include <cstdio>

#include "plot_frame.hpp"

namespace castscope::widgets {

namespace {

double yval(uint64_t c, bool log_y) {
  return log_y ? std::log10(1.0 + static_cast<double>(c)) : static_cast<double>(c);
}

double series_x0(const HistSeries& s, const HistPlotOptions& o) {
  return std::isfinite(s.x0) ? s.x0 : o.x0;
}

struct LegendItem {
  std::string label;
  ImU32 color;
  std::string note;
};

}  // namespace

void histogram_extent(const std::vector<HistSeries>& series, const HistPlotOptions& o, double* lo,
                      double* hi) {
  double a = INFINITY, b = -INFINITY;
  for (const HistSeries& s : series) {
    if (!s.counts || s.counts->empty()) continue;
    const double x0 = series_x0(s, o);
    a = std::min(a, x0);
    b = std::max(b, x0 + o.dx * static_cast<double>(s.counts->size()));
  }
  if (!(a < b)) a = 0, b = 1;
  *lo = a;
  *hi = b;
}

void draw_histogram(const char* id, const std::vector<HistSeries>& series, const HistPlotOptions& o,
                    ImVec2 size) {
  const auto [dl, p0, frame_size, hovered, active, fs] = begin_plot(id, size, 60.0f);
  size = frame_size;
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  ImVec4 gc = ImGui::GetStyleColorVec4(ImGuiCol_Border);
  gc.w *= 0.45f;
  const ImU32 grid = ImGui::GetColorU32(gc);
  const ImU32 axis = ImGui::GetColorU32(ImGuiCol_Border);
  constexpr ImU32 kShade = IM_COL32(90, 200, 120, 255);

  size_t nb = 0;
  for (const HistSeries& s : series)
    if (s.counts) nb = std::max(nb, s.counts->size());
  if (nb == 0) {
    dl->AddText(ImVec2(p0.x + 6, p0.y + 6), text, "no data");
    ImGui::PopID();
    return;
  }
  double full_lo, full_hi;
  histogram_extent(series, o, &full_lo, &full_hi);
  AxisView local;
  AxisView& view = o.view ? *o.view : local;
  axis_fit(view, full_lo, full_hi);

  // Legend (series, then the shaded range) in a row above the data, the count axis' caption at
  // its left; the row wraps when the panel is narrow.
  std::vector<LegendItem> legend;
  for (const HistSeries& s : series) legend.push_back({s.label, s.color, ""});
  const bool shade = std::isfinite(o.shade_lo) && std::isfinite(o.shade_hi);
  if (shade && !o.shade_label.empty()) legend.push_back({o.shade_label, kShade, o.shade_note});
  const char* ycap = o.log_y ? "count (log)" : "count";
  const float pad = fs * 0.3f;
  float lx = p0.x + pad + ImGui::CalcTextSize(ycap).x + fs, ly = p0.y + pad;
  const float right = p0.x + size.x - pad;
  std::vector<ImVec2> legend_at;
  for (LegendItem& it : legend) {
    // A label longer than the plot is cut with an ellipsis; its tooltip keeps the whole text.
    const float room = right - (p0.x + pad + fs * 4) - fs * 1.1f;
    if (ImGui::CalcTextSize(it.label.c_str()).x > room) {
      if (it.note.empty()) it.note = it.label;
      while (it.label.size() > 4 && ImGui::CalcTextSize((it.label + "...").c_str()).x > room)
        it.label.pop_back();
      it.label += "...";
    }
    const float w = fs * 1.1f + ImGui::CalcTextSize(it.label.c_str()).x;
    if (lx + w > right && !legend_at.empty()) lx = p0.x + pad + fs * 4, ly += fs * 1.15f;
    legend_at.push_back(ImVec2(lx, ly));
    lx += w + fs;
  }
  const float top = ly + fs * 1.3f;

  // Count axis range over the visible bins.
  double ymax = 0;
  for (const HistSeries& s : series) {
    if (!s.counts) continue;
    const double x0 = series_x0(s, o);
    for (size_t i = 0; i < s.counts->size(); ++i) {
      const double b0 = x0 + o.dx * static_cast<double>(i);
      if (b0 + o.dx <= view.lo || b0 >= view.hi) continue;
      ymax = std::max(ymax, yval((*s.counts)[i], o.log_y));
    }
  }
  if (ymax <= 0) ymax = 1;
  const double ytop = ymax * 1.06;
  Ticks yt;
  if (o.log_y) {
    yt = log_count_ticks(std::pow(10.0, ytop) - 1,
                         std::max(2, static_cast<int>((size.y) / (fs * 2))));
  } else {
    yt = linear_ticks(0, ytop, std::max(2, static_cast<int>(size.y / (fs * 2.5f))));
    if (yt.step < 1) yt = linear_ticks(0, std::max(ytop, 2.0), 2);
    for (size_t i = 0; i < yt.values.size(); ++i) yt.labels[i] = count_label(yt.values[i]);
  }
  float ylab_w = 0;
  for (const std::string& l : yt.labels)
    ylab_w = std::max(ylab_w, ImGui::CalcTextSize(l.c_str()).x);
  const bool xcap = !o.x_label.empty();
  const ImVec2 a(p0.x + pad + ylab_w + fs * 0.5f, top),
      b(p0.x + size.x - pad - fs * 0.5f, p0.y + size.y - pad - fs * (xcap ? 2.3f : 1.2f));
  if (!set_plot_area(view, a, b, fs)) {
    ImGui::PopID();
    return;
  }
  const double x_lo = view.lo, x_hi = view.hi;
  auto X = [&](double x) {
    return static_cast<float>(a.x + (x - x_lo) / (x_hi - x_lo) * (b.x - a.x));
  };
  auto Y = [&](double y) { return static_cast<float>(b.y - y / ytop * (b.y - a.y)); };
  auto Xinv = [&](float px) { return x_lo + (px - a.x) / (b.x - a.x) * (x_hi - x_lo); };

  // Zoom around the mouse, pan by dragging, double click for the whole range.
  ImGuiIO& io = ImGui::GetIO();
  if (hovered && io.MouseWheel != 0)
    axis_zoom(view, Xinv(io.MousePos.x), std::pow(1.25, static_cast<double>(io.MouseWheel)));
  if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f) && io.MouseDelta.x != 0)
    axis_pan(view, -io.MouseDelta.x / (b.x - a.x) * (x_hi - x_lo));
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) axis_reset(view);

  // Axes: grid lines and labels at nice steps.
  float last_label_y = 1e9f;  // labels closer than a line apart are left out (0 and 1 on log)
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const float y = Y(o.log_y ? std::log10(1.0 + yt.values[i]) : yt.values[i]);
    if (y < a.y - 1) continue;
    dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), grid);
    if (last_label_y - y < fs * 0.95f) continue;
    const ImVec2 ts = ImGui::CalcTextSize(yt.labels[i].c_str());
    dl->AddText(ImVec2(a.x - ts.x - fs * 0.3f, y - ts.y / 2), text, yt.labels[i].c_str());
    last_label_y = y;
  }
  dl->AddText(ImVec2(p0.x + pad, p0.y + pad), dim, ycap);
  const Ticks xt =
      linear_ticks(x_lo, x_hi, std::max(2, static_cast<int>((b.x - a.x) / (fs * 4.5f))));
  Ticks xs = xt;
  if (o.x_is_log2 && xt.step < 1) {  // whole binades only
    xs = Ticks{};
    xs.step = 1;
    for (double k = std::ceil(x_lo); k <= x_hi; ++k) {
      xs.values.push_back(k);
      xs.labels.push_back(tick_label(k, 1));
    }
  }
  float last_label_x = -1e9f;
  for (size_t i = 0; i < xs.values.size(); ++i) {
    const float x = X(xs.values[i]);
    dl->AddLine(ImVec2(x, a.y), ImVec2(x, b.y), grid);
    dl->AddLine(ImVec2(x, b.y), ImVec2(x, b.y + 4), axis);
    const float w = ImGui::CalcTextSize(xs.labels[i].c_str()).x;
    const float lx = std::clamp(x - w / 2, p0.x + pad, p0.x + size.x - pad - w);
    if (lx < last_label_x + fs * 0.5f) continue;  // whole binades can crowd a narrow plot
    dl->AddText(ImVec2(lx, b.y + 4), text, xs.labels[i].c_str());
    last_label_x = lx + w;
  }
  if (xcap) {
    std::string cap = o.x_label;
    if (view.zoomed()) cap += "   (zoomed: double-click to reset)";
    const float w = ImGui::CalcTextSize(cap.c_str()).x;
    dl->AddText(ImVec2((a.x + b.x - w) / 2, b.y + 4 + fs * 1.1f), dim, cap.c_str());
  }

  dl->PushClipRect(a, ImVec2(b.x + 1, b.y + 1), true);
  if (shade) {
    const float s0 = std::clamp(X(o.shade_lo), a.x, b.x), s1 = std::clamp(X(o.shade_hi), a.x, b.x);
    if (s1 > s0) {
      dl->AddRectFilled(ImVec2(s0, a.y), ImVec2(s1, b.y), IM_COL32(90, 200, 120, 40));
      dl->AddLine(ImVec2(s0, a.y), ImVec2(s0, b.y), IM_COL32(90, 200, 120, 200), 1.5f);
      dl->AddLine(ImVec2(s1, a.y), ImVec2(s1, b.y), IM_COL32(90, 200, 120, 200), 1.5f);
    }
  }
  if (x_lo < 0 && x_hi > 0 && !o.x_is_log2) dl->AddLine(ImVec2(X(0), a.y), ImVec2(X(0), b.y), axis);
  for (const HistSeries& s : series) {
    if (!s.counts) continue;
    const std::vector<uint64_t>& c = *s.counts;
    const double x0s = series_x0(s, o);
    if (s.filled) {
      for (size_t i = 0; i < c.size(); ++i) {
        if (!c[i]) continue;
        const float x0 = X(x0s + o.dx * i),
                    x1 = std::max(X(x0s + o.dx * (i + 1)) - 1.0f, x0 + 1.0f);
        if (x1 < a.x || x0 > b.x) continue;
        dl->AddRectFilled(ImVec2(x0, Y(yval(c[i], o.log_y))), ImVec2(x1, b.y), s.color);
      }
    } else {
      ImVec2 prev(X(x0s), b.y);
      const float thick = s.dashed ? 2.0f : 1.5f;
      for (size_t i = 0; i < c.size(); ++i) {
        const float y = Y(yval(c[i], o.log_y));
        const float x0 = X(x0s + o.dx * i), x1 = X(x0s + o.dx * (i + 1));
        if (!s.dashed) dl->AddLine(prev, ImVec2(x0, y), s.color, thick);
        if (s.dashed) {
          // Dashes along the level keep a second datatype apart from the first's outline.
          const float dash = std::max(3.0f, fs * 0.35f);
          for (float u = x0; u < x1; u += 2 * dash)
            dl->AddLine(ImVec2(u, y), ImVec2(std::min(u + dash, x1), y), s.color, thick);
        } else {
          dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), s.color, thick);
        }
        prev = ImVec2(x1, y);
      }
      if (!s.dashed) dl->AddLine(prev, ImVec2(prev.x, b.y), s.color, thick);
    }
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, b.y), axis);
  dl->AddLine(ImVec2(a.x, a.y), ImVec2(a.x, b.y), axis);

  for (size_t i = 0; i < legend.size(); ++i) {
    const ImVec2 at = legend_at[i];
    dl->AddRectFilled(ImVec2(at.x, at.y + fs * 0.2f), ImVec2(at.x + fs * 0.8f, at.y + fs * 0.85f),
                      legend[i].color);
    dl->AddText(ImVec2(at.x + fs * 1.1f, at.y), text, legend[i].label.c_str());
  }

  if (hovered) {
    const ImVec2 m = io.MousePos;
    bool on_legend = false;
    for (size_t i = 0; i < legend.size(); ++i) {
      const ImVec2 at = legend_at[i];
      const float w = fs * 1.1f + ImGui::CalcTextSize(legend[i].label.c_str()).x;
      if (!legend[i].note.empty() && m.x >= at.x && m.x < at.x + w && m.y >= at.y &&
          m.y < at.y + fs) {
        ImGui::SetTooltip("%s", legend[i].note.c_str());
        on_legend = true;
      }
    }
    const double xm = Xinv(m.x);
    const long bin = static_cast<long>(std::floor((xm - o.x0) / o.dx));
    if (!on_legend && m.x >= a.x && m.x <= b.x && m.y >= a.y && m.y <= b.y) {
      const float x0 = X(o.x0 + o.dx * bin), x1 = X(o.x0 + o.dx * (bin + 1));
      dl->AddRectFilled(ImVec2(std::max(x0, a.x), a.y), ImVec2(std::min(x1, b.x), b.y),
                        IM_COL32(255, 255, 255, 28));
      ImGui::BeginTooltip();
      const double lo = o.x0 + o.dx * bin, hi = lo + o.dx;
      if (o.x_is_log2)
        ImGui::Text("log2|x| in [%.6g, %.6g)  (|x| in [%.6g, %.6g))", lo, hi, std::exp2(lo),
                    std::exp2(hi));
      else
        ImGui::Text("bin [%.9g, %.9g)", lo, hi);
      for (const HistSeries& s : series) {
        if (!s.counts) continue;
        const long sb = static_cast<long>(std::floor((xm - series_x0(s, o)) / o.dx));
        const unsigned long long c =
            sb >= 0 && sb < static_cast<long>(s.counts->size()) ? (*s.counts)[sb] : 0ull;
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(s.color | IM_COL32_A_MASK), "%s: %llu",
                           s.label.c_str(), c);
      }
      ImGui::TextDisabled("wheel: zoom   drag: pan   double-click: whole range");
      ImGui::EndTooltip();
    }
  }
  ImGui::PopID();
}

}  // namespace castscope::widgets
