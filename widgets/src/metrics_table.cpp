#include "castscope/widgets/metrics_table.hpp"

#include <imgui.h>

#include <cmath>
#include <string>

#include "castscope/widgets/analysis.hpp"

namespace castscope::widgets {

namespace {

void row(const char* name, const char* shown, double exact, const char* what) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(name);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", what);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(shown);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%.17g", exact);
}

}  // namespace

void draw_metrics_table(const char* id, const Stats& s, double bits, double nominal,
                        int64_t row_length) {
  if (!ImGui::BeginTable(id, 2,
                         ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                             ImGuiTableFlags_SizingStretchProp))
    return;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", s.mse);
  row("MSE", buf, s.mse, "mean squared error over finite inputs");
  if (std::isinf(s.snr_db))
    std::snprintf(buf, sizeof buf, "exact");
  else
    std::snprintf(buf, sizeof buf, "%.3f dB", s.snr_db);
  row("SNR", buf, s.snr_db, "10 log10(sum x^2 / sum (x - q)^2)");
  std::snprintf(buf, sizeof buf, "%.4g", s.max_abs_err);
  row("max error", buf, s.max_abs_err, "largest |q - x|");
  std::snprintf(buf, sizeof buf, "%.4f %%  (%lld)", s.clipped_pct(),
                static_cast<long long>(s.clipped));
  row("clipped", buf, static_cast<double>(s.clipped), "finite inputs that saturated");
  std::snprintf(buf, sizeof buf, "%lld in / %lld out", static_cast<long long>(s.nonfinite_in),
                static_cast<long long>(s.nonfinite_out));
  row("non-finite", buf, static_cast<double>(s.nonfinite_in + s.nonfinite_out),
      "NaN/Inf in the input, and produced from finite inputs");
  std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(s.zeros_out));
  row("flushed to 0", buf, static_cast<double>(s.zeros_out), "non-zero inputs that became zero");
  std::snprintf(buf, sizeof buf, "%.4g", s.mean_err);
  row("bias", buf, s.mean_err, "mean of (q - x)");
  // The storage figure; the nominal one only beside it, labelled, where the rows differ from it.
  const std::string label = bits_label(bits, nominal, row_length);
  std::snprintf(buf, sizeof buf, "%.4g", bits);
  const bool differs = label != buf;
  std::string shown = buf;
  if (differs) {
    std::snprintf(buf, sizeof buf, "%.4g", nominal);
    shown += std::string(" (nominal ") + buf + ")";
  }
  const std::string what = "storage bits per value on this tensor, every scale included" +
                           (differs ? "; " + label : std::string());
  row("bits per value", shown.c_str(), bits, what.c_str());
  std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(s.count));
  row("values", buf, static_cast<double>(s.count), "finite elements compared");
  ImGui::EndTable();
}

}  // namespace castscope::widgets
