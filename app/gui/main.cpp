// castscope: the desktop app. GLFW window + OpenGL 3 + Dear ImGui; --headless and --script for
// use without a person (CI, documentation screenshots).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>

#include "headless.hpp"
#include "panels.hpp"
#include "screenshot.hpp"
#include "script.hpp"
#include "ui_probe.hpp"

namespace castscope::gui {

namespace {

std::mutex g_pending_mutex;
std::vector<std::string> g_notices;  // from engine worker threads
std::vector<std::string> g_drops;    // from the GLFW drop callback
bool g_rescale = false;

void on_drop(GLFWwindow*, int count, const char** paths) {
  std::lock_guard<std::mutex> lock(g_pending_mutex);
  for (int i = 0; i < count; ++i) g_drops.emplace_back(paths[i]);
}

void on_content_scale(GLFWwindow*, float, float) {
  g_rescale = true;
}

// Rasterises the UI font at the monitor's scale so text stays sharp on high-DPI screens
// (scaling a low-resolution atlas would blur it).
void load_fonts(AppState& app, GLFWwindow* window) {
  float xs = 1, ys = 1;
  glfwGetWindowContentScale(window, &xs, &ys);
  app.dpi_scale = app.opt.ui_scale > 0 ? app.opt.ui_scale : std::max(1.0f, xs);
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  const float px = 15.0f * app.dpi_scale;
  const char* candidates[] = {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                              "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
                              "/usr/share/fonts/TTF/DejaVuSans.ttf"};
  bool ok = false;
  for (const char* c : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(c, ec) && io.Fonts->AddFontFromFileTTF(c, px)) {
      ok = true;
      break;
    }
  }
  if (!ok) {
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f * app.dpi_scale;
    io.Fonts->AddFontDefault(&cfg);
  }
  set_theme(app, app.dark);
}

void shortcuts(AppState& app) {
  ImGuiIO& io = ImGui::GetIO();
  const bool ctrl = io.KeyCtrl;
  auto pressed = [](int key) { return ImGui::IsKeyPressed(key, false); };
  if (ctrl && pressed(GLFW_KEY_O)) {
    app.show[static_cast<int>(PanelId::Files)] = true;
    app.focus_panel = static_cast<int>(PanelId::Files);
    app.focus_open_path = true;
  }
  if (ctrl && pressed(GLFW_KEY_D)) {
    app.show[static_cast<int>(PanelId::Composer)] = true;
    app.focus_panel = static_cast<int>(PanelId::Composer);
    app.focus_dtype = true;
  }
  if (ctrl && pressed(GLFW_KEY_T)) set_theme(app, !app.dark);
  if (ctrl && pressed(GLFW_KEY_L)) app.hist_log_y = !app.hist_log_y;
  if (ctrl && pressed(GLFW_KEY_E)) app.hist_log_x = !app.hist_log_x;
  if (ctrl && pressed(GLFW_KEY_S)) app.screenshot_requested = true;
  if (ctrl && pressed(GLFW_KEY_Q)) app.quit = true;
  for (int i = 0; i < static_cast<int>(PanelId::Count) && i < 9; ++i)
    if (ctrl && pressed(GLFW_KEY_1 + i)) {
      app.show[i] = true;
      app.focus_panel = i;
    }
  if (pressed(GLFW_KEY_F5)) app.recompute = true;
  if (pressed(GLFW_KEY_ESCAPE) && app.busy()) {
    app.loader.cancel();
    app.analyzer.cancel();
    app.map_job.cancel();
    app.act_job.cancel();
    app.note("cancelled");
  }
}

int run_gui(AppOptions opt) {
  glfwSetErrorCallback([](int code, const char* msg) {
    std::fprintf(stderr, "castscope: GLFW %d: %s\n", code, msg);
  });
  if (!glfwInit()) {
    std::fprintf(stderr,
                 "castscope: cannot open a window (no display?). Use --headless for a summary "
                 "without one.\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(opt.width, opt.height, "CastScope", nullptr, nullptr);
  if (!window) {
    std::fprintf(
        stderr,
        "castscope: cannot create an OpenGL 3 window. Use --headless for a summary without one.\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(opt.script.empty() ? 1 : 0);
  glfwSetDropCallback(window, on_drop);
  glfwSetWindowContentScaleCallback(window, on_content_scale);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  static std::string ini;
  if (!opt.script.empty()) {
    // Scripted sessions start from the default layout every time and use the script's pointer
    // instead of the real one, so screenshots do not depend on where the X server left its
    // cursor; the frame's items and text are recorded for the script to find and check.
    io.IniFilename = nullptr;
    probe::set_recording(true);
  } else if (const char* home = std::getenv("HOME")) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(home) / ".config" / "castscope", ec);
    ini = (std::filesystem::path(home) / ".config" / "castscope" / "imgui.ini").string();
    io.IniFilename = ini.c_str();
  }

  auto app = std::make_unique<AppState>();
  app->opt = opt;
  app->dark = opt.theme != "light";
  load_fonts(*app, window);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  set_notice_handler([](const std::string& m) {
    std::lock_guard<std::mutex> lock(g_pending_mutex);
    g_notices.push_back(m);
  });
  app->recent = load_recent();
  set_dtype(*app, opt.dtype);
  open_source(*app, opt.file.empty() ? "demo" : opt.file);

  std::unique_ptr<Script> script;
  int rc = 0;
  if (!opt.script.empty()) {
    try {
      script = std::make_unique<Script>(opt.script);
    } catch (const Error& e) {
      std::fprintf(stderr, "castscope: %s\n", e.what());
      rc = 2;
      app->quit = true;
    }
  }

  auto last = std::chrono::steady_clock::now();
  while (!glfwWindowShouldClose(window) && !app->quit) {
    if (script || app->busy())
      glfwPollEvents();
    else
      glfwWaitEventsTimeout(0.25);  // idle: wake on input only, so an idle app costs nothing
    {
      std::lock_guard<std::mutex> lock(g_pending_mutex);
      for (std::string& n : g_notices) app->note(std::move(n));
      g_notices.clear();
      if (!g_drops.empty() && !app->loader.running()) open_source(*app, g_drops.front());
      g_drops.clear();
    }
    if (g_rescale) {
      g_rescale = false;
      load_fonts(*app, window);
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    if (script) script->step(*app);
    update_jobs(*app);

    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (script) script->apply_input(io);
    ImGui::NewFrame();
    shortcuts(*app);
    draw_menu_bar(*app);
    draw_files_panel(*app);
    draw_tensors_panel(*app);
    draw_composer_panel(*app);
    draw_views_panel(*app);
    draw_scale_modes_panel(*app);
    draw_compare_panel(*app);
    draw_plan_panel(*app);
    draw_export_panel(*app);
    draw_matmul_panel(*app);
    draw_teach_panel(*app);
    draw_model_map_panel(*app);
    draw_activations_panel(*app);
    draw_status_bar(*app);
    ImGui::Render();
    probe::end_frame();
    int w = 0, h = 0;
    glfwGetFramebufferSize(window, &w, &h);
    glViewport(0, 0, w, h);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x * 0.8f, bg.y * 0.8f, bg.z * 0.8f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

    std::string shot;
    if (script && script->wants_screenshot()) shot = script->take_screenshot_path();
    if (app->screenshot_requested) {
      app->screenshot_requested = false;
      char name[64];
      const std::time_t t = std::time(nullptr);
      std::strftime(name, sizeof name, "castscope-%Y%m%d-%H%M%S.png", std::localtime(&t));
      shot = name;
    }
    if (app->view_shot_panel >= 0) {
      const int i = app->view_shot_panel;
      app->view_shot_panel = -1;
      int ww = 0, wh = 0;
      glfwGetWindowSize(window, &ww, &wh);
      const float sx = ww ? static_cast<float>(w) / ww : 1.0f,
                  sy = wh ? static_cast<float>(h) / wh : 1.0f;
      const ImVec4 r = app->view_shot_rect.z > 0 ? app->view_shot_rect : app->panel_rect[i];
      app->view_shot_rect = ImVec4();
      try {
        if (!app->show[i] || r.z <= 0)
          throw Error(std::string("panel '") + panel_name(static_cast<PanelId>(i)) +
                      "' is not shown");
        save_framebuffer_png(app->view_shot_path, w, h, static_cast<int>(r.x * sx),
                             static_cast<int>(r.y * sy), static_cast<int>(r.z * sx),
                             static_cast<int>(r.w * sy));
        app->note("saved " + app->view_shot_path);
      } catch (const std::exception& e) {
        app->note(e.what());
      }
    }
    if (!shot.empty()) {
      try {
        save_framebuffer_png(shot, w, h);
        app->note("saved " + shot);
      } catch (const std::exception& e) {
        app->note(e.what());
      }
    }
    glfwSwapBuffers(window);
    ++app->frame;
    const auto now = std::chrono::steady_clock::now();
    if (app->frame == 1)
      app->first_frame = {std::chrono::duration<double, std::milli>(now - opt.started).count(),
                          gpu_starting(), gpu_running()};
    const double dt = std::chrono::duration<double>(now - last).count();
    last = now;
    if (dt > 0) app->fps = app->fps * 0.9 + 0.1 / dt;
    if (script && script->done() && !app->quit && !app->busy()) app->quit = true;
  }

  if (script && !script->errors().empty()) {
    for (const std::string& e : script->errors())
      std::fprintf(stderr, "castscope: %s\n", e.c_str());
    rc = 3;
  }
  if (!opt.state.empty()) {
    try {
      const std::string text =
          state_json(*app, script ? script->errors() : std::vector<std::string>{});
      io::write_atomically(opt.state, [&](const auto& put) { put(text.data(), text.size()); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "castscope: %s\n", e.what());
      rc = rc ? rc : 1;
    }
  }
  set_notice_handler(nullptr);
  app.reset();  // joins worker threads while the GL context still exists for the textures
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace

}  // namespace castscope::gui

int main(int argc, char** argv) {
  using namespace castscope;
  const auto started = std::chrono::steady_clock::now();
  widgets::retain_freed_memory();
  // The CUDA context comes up on its own thread while the window opens and the file loads; the
  // first frame never waits for it.
  start_gpu_in_background();
  gui::AppOptions opt;
  CLI::App cli{"CastScope: see what low-precision number formats do to tensors"};
  cli.add_option(
      "file", opt.file,
      "model or tensor file to open (.safetensors, .npz, .npy, .gguf, ...) or demo:NAME");
  cli.add_flag("--headless", opt.headless,
               "no window: cast the file (or the demo) and print a metrics summary");
  cli.add_option("--script", opt.script, "run a scripted session (see docs/gui.md)")
      ->check(CLI::ExistingFile);
  cli.add_option("--state", opt.state, "write the app state as JSON to this file on exit");
  cli.add_option("--dtype", opt.dtype, "datatype to start with (registry name or NSPEC[_SSPEC])");
  cli.add_option("--theme", opt.theme, "dark or light")->check(CLI::IsMember({"dark", "light"}));
  cli.add_option("--width", opt.width, "window width")->check(CLI::Range(320, 16384));
  cli.add_option("--height", opt.height, "window height")->check(CLI::Range(240, 16384));
  cli.add_option("--ui-scale", opt.ui_scale,
                 "size of text and controls (default: the monitor's content scale)")
      ->check(CLI::Range(0.5, 4.0));
  CLI11_PARSE(cli, argc, argv);
  opt.started = started;
  try {
    DataType::parse(opt.dtype);
  } catch (const Error& e) {
    std::fprintf(stderr, "castscope: --dtype: %s\n", e.what());
    return 2;
  }
  const int rc = opt.headless ? gui::run_headless(opt) : gui::run_gui(opt);
  finish_gpu_start();
  return rc;
}
