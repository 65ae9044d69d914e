// Activations panel: the output error of the selected weight as a linear layer, y = x W^T, with
// activations from a file or a synthetic generator with outlier channels, both operands cast;
// SNR, error histogram and per-output-channel error, the product that computed it (cuBLASLt on
// the tensor cores where they take the formats) and its time, beside the GEMM timings.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "castscope/widgets/histogram_plot.hpp"
#include "castscope/widgets/line_plot.hpp"
#include "panels.hpp"

namespace castscope::gui {

void draw_activations_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Activations, "Activations", 0.47f, 0.0f, 0.53f, 1.0f)) return;
  save_view_button(app, PanelId::Activations);
  const bool running = app.act_job.running();
  const Tensor* w = app.loaded && app.loaded->data ? &app.loaded->data : nullptr;
  if (w && w->rank() >= 2)
    ImGui::TextWrapped("weight: %s %s (as W [out, in] along its layout's reduction axis)",
                       app.loaded->tensor.c_str(), shape_str(w->shape()).c_str());
  else
    ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "select a weight tensor (rank 2 or more)");
  ImGui::BeginDisabled(running);
  hint_field("activations", "file .npy / .safetensors (empty: synthetic)", app.act_path, 24);
  if (!app.act_path[0]) {
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
    ImGui::InputInt("tokens", &app.act_tokens, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
    ImGui::InputInt("outlier channels", &app.act_outliers, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
    ImGui::InputFloat("outlier scale", &app.act_outlier_scale, 0, 0, "%.1f");
    app.act_tokens = std::clamp(app.act_tokens, 1, 65536);
    app.act_outliers = std::max(app.act_outliers, 0);
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
  ImGui::InputText("activation datatype", app.act_dtype, sizeof app.act_dtype);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
  ImGui::InputText("weight datatype", app.act_weight_dtype, sizeof app.act_weight_dtype);
  const char* sizes[] = {"none", "16", "32", "64", "128", "256"};
  int sel = 0;
  for (int i = 1; i < 6; ++i)
    if (app.act_rotate == (8 << i)) sel = i;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  if (ImGui::Combo("rotate (random signs)", &sel, sizes, 6)) app.act_rotate = sel ? (8 << sel) : 0;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  ImGui::InputInt("seed", &app.act_seed, 0);
  if (ImGui::Button("Compute")) start_activations(app);
  ImGui::EndDisabled();
  job_line(app.act_job);
  if (!app.act_error.empty()) error_text(app.act_error);
  if (const LinearError* e = app.act_result.get()) {
    ImGui::Separator();
    ImGui::Text("%s: y = x W^T, %lld tokens x %lld in -> %lld out", app.act_weight.c_str(),
                static_cast<long long>(e->tokens), static_cast<long long>(e->in),
                static_cast<long long>(e->out));
    ImGui::Text("output SNR %.2f dB   relative error %.4g   max error %.4g", e->snr_db, e->rel_err,
                e->max_abs_err);
    ImGui::Text("operands: activations %.2f dB, weight %.2f dB   casts %.1f ms (%s)", e->act_snr_db,
                e->weight_snr_db, e->cast_ms, e->backend.c_str());
    // The product that gave yq, and its own time, beside the error it produced.
    const ImVec4 tc = e->tensor_cores ? ImVec4(0.45f, 0.85f, 0.45f, 1.0f)
                                      : ImGui::GetStyle().Colors[ImGuiCol_Text];
    const bool on_cpu = e->product.find("CPU") != std::string::npos;
    ImGui::TextColored(tc, "product: %s   %.3f ms%s   (both products %.1f ms)", e->product.c_str(),
                       e->gemm_ms, on_cpu ? "" : " (GPU, median)", e->matmul_ms);
    if (!e->product_note.empty()) ImGui::TextDisabled("%s", e->product_note.c_str());
    const float width = ImGui::GetContentRegionAvail().x;
    const float plot_h = std::max(ImGui::GetFontSize() * 11, 130.0f);
    widgets::HistPlotOptions ho;
    ho.x0 = e->error_hist.lo;
    ho.dx = e->error_hist.bin_width();
    ho.log_y = app.hist_log_y;
    ho.x_label = "output error yq - y";
    ho.view = &app.act_hist_view;
    widgets::draw_histogram(
        "err", {{"output error", IM_COL32(200, 90, 200, 220), &e->error_hist.counts, true}}, ho,
        ImVec2(width, plot_h));
    if (!e->channel_rel_err.empty()) {
      const auto worst = std::max_element(e->channel_rel_err.begin(), e->channel_rel_err.end());
      widgets::LinePlotOptions lo;
      lo.x_label = "output channel";
      lo.y_label = "relative error";
      lo.view = &app.act_chan_view;
      widgets::draw_line_plot("chan", e->channel_rel_err, lo, ImVec2(width, plot_h));
      ImGui::Text("worst output channel %lld: relative error %.4g",
                  static_cast<long long>(worst - e->channel_rel_err.begin()), *worst);
    }
  }
  ImGui::Separator();
  // The same shape through the tensor-core GEMMs, so the error sits beside the time it buys.
  std::string why;
  if (!gpu_starting() && gemm_available(&why)) {
    if (const LinearError* e = app.act_result.get()) {
      if (ImGui::Button("GEMM timings at this shape") && !app.gemm_job.running()) {
        app.gemm_m = static_cast<int>(std::clamp<int64_t>(e->tokens, 16, 65536));
        app.gemm_n = static_cast<int>(std::clamp<int64_t>(e->out, 16, 65536));
        app.gemm_k = static_cast<int>(std::clamp<int64_t>(e->in, 16, 65536));
        start_gemm(app);
      }
    }
    job_line(app.gemm_job);
    if (const GemmRun* g = app.gemm.get())
      for (const GemmResult& r : g->results)
        ImGui::Text("%-10s %d x %d x %d  %.3f ms  %.1f TFLOP/s", to_string(r.kind), r.m, r.n, r.k,
                    r.ms, r.tflops);
  } else {
    // The reason can be long (a driver message); it wraps inside the panel.
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("GEMM timings need a GPU: %s", why.c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::End();
}

}  // namespace castscope::gui
