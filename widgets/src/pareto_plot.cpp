#include "castscope/widgets/pareto_plot.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "plot_frame.hpp"

namespace castscope::widgets {

bool draw_pareto_plot(const char* id, const std::vector<ParetoPlotPoint>& pts,
                      const ParetoPlotOptions& o, double* budget, ImVec2 size) {
  if (o.y_label && *o.y_label) ImGui::TextDisabled("%s", o.y_label);
  const auto [dl, p0, frame_size, hovered, active, fs] = begin_plot(id, size, 50.0f);
  size = frame_size;
  const ImVec2 a(p0.x + fs * 3.2f, p0.y + 4), b(p0.x + size.x - 6, p0.y + size.y - fs * 1.4f);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 grid = ImGui::GetColorU32(ImGuiCol_Border);
  if (pts.empty()) {
    dl->AddText(ImVec2(a.x + 6, a.y + 6), text, "no plans yet");
    ImGui::PopID();
    return false;
  }
  // A zero error (a lossless candidate) sits at the bottom of the log axis.
  double lo_e = std::numeric_limits<double>::infinity(), hi_e = 0;
  for (const ParetoPlotPoint& p : pts)
    if (p.error > 0) {
      lo_e = std::min(lo_e, p.error);
      hi_e = std::max(hi_e, p.error);
    }
  if (!(hi_e > 0)) lo_e = hi_e = 1;
  const double ly0 = std::log10(lo_e) - 0.3, ly1 = std::log10(hi_e) + 0.1;
  double x0 = std::isnan(o.min_bpw) ? pts.front().bits_per_weight : o.min_bpw;
  double x1 = std::isnan(o.max_bpw) ? pts.back().bits_per_weight : o.max_bpw;
  if (!(x1 > x0)) x1 = x0 + 1;
  const double pad = (x1 - x0) * 0.03;
  const double vx0 = x0 - pad, vx1 = x1 + pad;
  auto X = [&](double x) {
    return static_cast<float>(a.x + (x - vx0) / (vx1 - vx0) * (b.x - a.x));
  };
  auto Y = [&](double e) {
    const double l = e > 0 ? std::log10(e) : ly0;
    return static_cast<float>(b.y - (l - ly0) / (ly1 - ly0) * (b.y - a.y));
  };
  // Decades of the error and whole bits.
  char buf[96];
  for (int d = static_cast<int>(std::ceil(ly0)); d <= static_cast<int>(std::floor(ly1)); ++d) {
    const float y = Y(std::pow(10.0, d));
    dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), grid);
    std::snprintf(buf, sizeof buf, "1e%d", d);
    dl->AddText(ImVec2(p0.x + 3, y - fs * 0.5f), text, buf);
  }
  const int step = x1 - x0 > 12 ? 2 : 1;
  const float label_x = b.x - ImGui::CalcTextSize("bits per weight").x;
  for (int w = static_cast<int>(std::ceil(vx0)); w <= static_cast<int>(vx1); w += step) {
    const float x = X(w);
    dl->AddLine(ImVec2(x, a.y), ImVec2(x, b.y), grid);
    std::snprintf(buf, sizeof buf, "%d", w);
    if (x + ImGui::CalcTextSize(buf).x < label_x - fs * 0.5f)
      dl->AddText(ImVec2(x - fs * 0.3f, b.y + 2), text, buf);
  }
  dl->AddText(ImVec2(label_x, b.y + 2), text, "bits per weight");
  // The best error within each budget: flat until the next optimal plan fits.
  const ImU32 line = IM_COL32(90, 160, 230, 255);
  for (size_t i = 0; i < pts.size(); ++i) {
    const float xa = X(pts[i].bits_per_weight), ya = Y(pts[i].error);
    const float xb = i + 1 < pts.size() ? X(pts[i + 1].bits_per_weight) : X(vx1);
    dl->AddLine(ImVec2(xa, ya), ImVec2(xb, ya), line, 1.5f);
    if (i + 1 < pts.size())
      dl->AddLine(ImVec2(xb, ya), ImVec2(xb, Y(pts[i + 1].error)), line, 1.5f);
    dl->AddCircleFilled(ImVec2(xa, ya), 3.0f, line);
  }
  bool changed = false;
  if (active && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
    const double mx = vx0 + (ImGui::GetIO().MousePos.x - a.x) / (b.x - a.x) * (vx1 - vx0);
    const double v = std::clamp(mx, x0, x1);
    if (v != *budget) {
      *budget = v;
      changed = true;
    }
  }
  const ImU32 amber = IM_COL32(240, 170, 60, 255);
  const float bx = X(std::clamp(*budget, vx0, vx1));
  dl->AddLine(ImVec2(bx, a.y), ImVec2(bx, b.y), amber, 2.0f);
  std::snprintf(buf, sizeof buf, "budget %.3f", *budget);
  const float tw = ImGui::CalcTextSize(buf).x;
  dl->AddText(ImVec2(std::min(bx + 4, b.x - tw), a.y + 2), amber, buf);
  if (!std::isnan(o.chosen_bpw)) {
    const ImVec2 c(X(o.chosen_bpw), Y(o.chosen_error));
    dl->AddCircle(c, 7.0f, amber, 0, 2.0f);
    dl->AddCircleFilled(c, 4.0f, amber);
  }
  if (hovered && !active) {
    // The nearest plan under the pointer.
    const float mx = ImGui::GetIO().MousePos.x;
    size_t best = 0;
    for (size_t i = 1; i < pts.size(); ++i)
      if (std::fabs(X(pts[i].bits_per_weight) - mx) < std::fabs(X(pts[best].bits_per_weight) - mx))
        best = i;
    ImGui::SetTooltip(
        "optimal plan: %.4f bits per weight, predicted error %.4g\n"
        "drag or click to set the budget",
        pts[best].bits_per_weight, pts[best].error);
  }
  ImGui::PopID();
  return changed;
}

}  // namespace castscope::widgets
