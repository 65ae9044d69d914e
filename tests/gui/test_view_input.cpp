// The histogram and the zoomable image driven by ImGui's own mouse input (position, buttons,
// wheel), frame by frame as the app feeds it, without a window or GL: wheel zooms, drag pans,
// double click resets, hover finds the cell, a click that does not move is a click.
#include <gtest/gtest.h>
#include <imgui.h>

#include <cmath>
#include <functional>

#include "castscope/widgets/grid_image.hpp"
#include "castscope/widgets/histogram_plot.hpp"
#include "castscope/widgets/line_plot.hpp"

using namespace castscope::widgets;

namespace {

class Ui {
 public:
  Ui() {
    ctx_ = ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(1280, 800);
    io.IniFilename = nullptr;
    unsigned char* px;
    int w, h;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  }
  ~Ui() { ImGui::DestroyContext(ctx_); }
  // One frame with the mouse at (x, y), the left button down or up and a wheel turn.
  void frame(float x, float y, bool down, float wheel, const std::function<void()>& draw) {
    ImGuiIO& io = ImGui::GetIO();
    io.DeltaTime = 1.0f / 60;
    io.MousePos = ImVec2(x, y);
    io.MouseDown[0] = down;
    io.MouseWheel = wheel;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(800, 500));
    ImGui::Begin("test", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoTitleBar);
    draw();
    ImGui::End();
    ImGui::Render();
  }

 private:
  ImGuiContext* ctx_;
};

}  // namespace

TEST(ViewInput, HistogramZoomsPansAndResetsWithTheMouse) {
  Ui ui;
  std::vector<uint64_t> counts(64);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = (i * 37) % 11 + 1;
  AxisView view;
  HistPlotOptions o;
  o.x0 = -3.2;
  o.dx = 0.1;
  o.x_label = "x";
  o.view = &view;
  const std::vector<HistSeries> s = {{"original", IM_COL32(70, 140, 230, 255), &counts, true}};
  auto draw = [&] { draw_histogram("h", s, o, ImVec2(700, 400)); };
  ui.frame(1000, 700, false, 0, draw);  // mouse outside: the full range
  EXPECT_DOUBLE_EQ(view.lo, -3.2);
  EXPECT_NEAR(view.hi, 3.2, 1e-12);
  ui.frame(400, 200, false, 0, draw);
  ui.frame(400, 200, false, 2, draw);  // two wheel notches up over the plot
  EXPECT_TRUE(view.zoomed());
  EXPECT_NEAR(view.hi - view.lo, 6.4 / (1.25 * 1.25), 1e-9);
  ui.frame(1000, 700, false, 3, draw);  // a wheel turn elsewhere changes nothing
  EXPECT_NEAR(view.hi - view.lo, 6.4 / (1.25 * 1.25), 1e-9);
  // Drag to the left: the data follows the mouse, so the visible range moves right.
  const double lo = view.lo;
  ui.frame(400, 200, true, 0, draw);
  for (int i = 1; i <= 5; ++i) ui.frame(400 - 20.0f * i, 200, true, 0, draw);
  ui.frame(300, 200, false, 0, draw);
  EXPECT_GT(view.lo, lo);
  EXPECT_NEAR(view.hi - view.lo, 6.4 / (1.25 * 1.25), 1e-9);
  // A double click shows the whole range again.
  ui.frame(300, 200, true, 0, draw);
  ui.frame(300, 200, false, 0, draw);
  ui.frame(300, 200, true, 0, draw);
  ui.frame(300, 200, false, 0, draw);
  EXPECT_FALSE(view.zoomed());
}

TEST(ViewInput, ImageZoomsPansHoversAndClicks) {
  Ui ui;
  Texture none;  // no GL here: the image draws its frame, axes and lines only
  const GridGeom g{.rows = 120,
                   .cols = 208,
                   .cell_rows = 1,
                   .cell_cols = 32,
                   .elem_rows = 120,
                   .elem_cols = 6625};
  GridView view;
  float drag = 0;
  GridImage last;
  auto draw = [&] { last = draw_grid_image("image", view, drag, none, g, ImVec2(700, 400)); };
  ui.frame(1000, 700, false, 0, draw);
  EXPECT_FALSE(last.hit.has_value());
  // Whole pixels, as ImGui rounds the mouse position down.
  const float mx = std::floor(last.p0.x + last.g.width * 0.43f),
              my = std::floor(last.p0.y + last.g.height * 0.57f);
  ui.frame(mx, my, false, 0, draw);
  ASSERT_TRUE(last.hit.has_value());
  const auto want = grid_hit(view, last.g, mx - last.p0.x, my - last.p0.y);
  ASSERT_TRUE(want.has_value());
  EXPECT_EQ(last.hit->row, want->row);
  EXPECT_EQ(last.hit->col, want->col);
  // Wheel: both axes zoom, the cell under the mouse stays.
  const int64_t row = last.hit->row, col = last.hit->col;
  ui.frame(mx, my, false, 1, draw);
  EXPECT_NEAR(view.zx, 1.25, 1e-12);
  EXPECT_NEAR(view.zy, 1.25, 1e-12);
  ui.frame(mx, my, false, 0, draw);
  EXPECT_EQ(last.hit->row, row);
  EXPECT_EQ(last.hit->col, col);
  // A press and release without moving is a click on that cell.
  ui.frame(mx, my, true, 0, draw);
  EXPECT_FALSE(last.clicked);
  ui.frame(mx, my, false, 0, draw);
  EXPECT_TRUE(last.clicked);
  // A drag pans and is no click.
  const double u0 = view.u0;
  ui.frame(mx, my, true, 0, draw);
  for (int i = 1; i <= 4; ++i) ui.frame(mx - 15.0f * i, my, true, 0, draw);
  ui.frame(mx - 60, my, false, 0, draw);
  EXPECT_FALSE(last.clicked);
  EXPECT_GT(view.u0, u0);
  // Wheel at one spot until the element level: an element is kElementPx wide and tall.
  for (int i = 0; i < 100; ++i) ui.frame(mx, my, false, 1, draw);
  EXPECT_NEAR(grid_element_px_x(view, last.g), kElementPx, 1e-6);
  EXPECT_NEAR(grid_element_px_y(view, last.g), kElementPx, 1e-6);
}

TEST(ViewInput, LinePlotZoomsAndPansOnX) {
  Ui ui;
  std::vector<float> y(300);
  for (size_t i = 0; i < y.size(); ++i) y[i] = 0.1f + 0.01f * static_cast<float>(i % 17);
  AxisView view;
  LinePlotOptions o;
  o.x_label = "output channel";
  o.y_label = "relative error";
  o.view = &view;
  auto draw = [&] { draw_line_plot("l", y, o, ImVec2(700, 300)); };
  ui.frame(1000, 700, false, 0, draw);
  EXPECT_EQ(view.lo, 0);
  EXPECT_EQ(view.hi, 300);
  ui.frame(300, 150, false, 0, draw);
  ui.frame(300, 150, false, 3, draw);
  EXPECT_NEAR(view.hi - view.lo, 300 / std::pow(1.25, 3), 1e-9);
  const double lo = view.lo;
  ui.frame(300, 150, true, 0, draw);
  for (int i = 1; i <= 4; ++i) ui.frame(300 + 20.0f * i, 150, true, 0, draw);
  ui.frame(380, 150, false, 0, draw);
  EXPECT_LT(view.lo, lo);  // dragged right: earlier channels come into view
}
