// File browser: a path box, a directory listing, the embedded demo tensors and recent files.
#include <imgui.h>

#include <algorithm>
#include <filesystem>

#include "demo_assets.hpp"
#include "panels.hpp"

namespace castscope::gui {

namespace {

bool openable(const std::filesystem::path& p) {
  static const char* ext[] = {".npy", ".npz", ".safetensors", ".gguf", ".onnx", ".json"};
  const std::string e = p.extension().string();
  return std::any_of(std::begin(ext), std::end(ext), [&](const char* x) { return e == x; });
}

struct Listing {
  std::filesystem::path dir;
  std::vector<std::filesystem::directory_entry> entries;
  std::string error;
};

void list_dir(Listing& l, const std::filesystem::path& dir) {
  l.dir = dir;
  l.entries.clear();
  l.error.clear();
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2) || openable(it->path())) l.entries.push_back(*it);
    if (l.entries.size() > 2000) break;
  }
  if (ec) l.error = dir.string() + ": " + ec.message();
  std::sort(l.entries.begin(), l.entries.end(), [](const auto& a, const auto& b) {
    std::error_code e;
    const bool da = a.is_directory(e), db = b.is_directory(e);
    return da != db ? da : a.path().filename() < b.path().filename();
  });
}

}  // namespace

void draw_files_panel(AppState& app) {
  if (!begin_panel(app, PanelId::Files, "Files", 0.0f, 0.0f, 0.22f, 0.36f)) return;
  static Listing listing;
  if (listing.dir.empty()) {
    std::error_code ec;
    list_dir(listing, std::filesystem::current_path(ec));
  }
  const bool busy = app.loader.running();
  ImGui::BeginDisabled(busy);
  if (app.focus_open_path) {
    ImGui::SetKeyboardFocusHere();
    app.focus_open_path = false;
  }
  ImGui::SetNextItemWidth(-ImGui::GetFontSize() * 3.5f);
  const bool enter =
      ImGui::InputTextWithHint("##path", "file, directory or demo:NAME", app.open_path,
                               sizeof app.open_path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Open") || enter) && app.open_path[0]) {
    std::error_code ec;
    if (std::filesystem::is_directory(app.open_path, ec) &&
        !std::filesystem::exists(
            std::filesystem::path(app.open_path) / "model.safetensors.index.json", ec))
      list_dir(listing, app.open_path);
    else
      open_source(app, app.open_path);
  }
  if (ImGui::BeginTabBar("##src")) {
    if (ImGui::BeginTabItem("Browse")) {
      {
        const std::string dir = listing.dir.string();
        const std::string shown = fit_text(dir, ImGui::GetContentRegionAvail().x);
        ImGui::TextDisabled("%s", shown.c_str());
        if (shown != dir && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", dir.c_str());
      }
      if (!listing.error.empty()) error_text(listing.error);
      ImGui::BeginChild("##list", ImVec2(0, 0), false);
      if (ImGui::Selectable("..")) list_dir(listing, listing.dir.parent_path());
      std::filesystem::path go;
      for (const auto& e : listing.entries) {
        std::error_code ec;
        const bool dir = e.is_directory(ec);
        const std::string name = (dir ? "[dir] " : "") + e.path().filename().string();
        const std::string label = fit_text(name, ImGui::GetContentRegionAvail().x) + "###" + name;
        if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick) &&
            (ImGui::IsMouseDoubleClicked(0) || !dir)) {
          if (dir)
            go = e.path();
          else
            open_source(app, e.path().string());
        }
        if (!dir && ImGui::IsItemHovered())
          ImGui::SetTooltip("%s\n%s", name.c_str(),
                            human_bytes(static_cast<double>(e.file_size(ec))).c_str());
      }
      if (!go.empty()) list_dir(listing, go);
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
    // The open model's files, relative to the folder opened (a checkpoint's shards).
    if (app.model && app.model_path != "demo" && ImGui::BeginTabItem("Model")) {
      std::vector<std::pair<std::string, int>> files;
      for (const io::TensorInfo& t : app.model->tensors()) {
        const std::string f = model_relative(app, t.file.empty() ? app.model_path : t.file);
        auto it =
            std::find_if(files.begin(), files.end(), [&](const auto& e) { return e.first == f; });
        if (it == files.end())
          files.emplace_back(f, 1);
        else
          ++it->second;
      }
      name_text(app.model_path);
      for (const auto& [f, n] : files) {
        const std::string line =
            f + "  (" + std::to_string(n) + (n == 1 ? " tensor)" : " tensors)");
        ImGui::Bullet();
        name_text(line);
      }
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Demo")) {
      ImGui::TextWrapped("Small tensors built into the program:");
      for (const EmbeddedFile& f : embedded_demo_files()) {
        const std::string label = std::string("demo:") + f.name;
        if (ImGui::Selectable(label.c_str(), app.model_path == "demo" &&
                                                 app.selected == "demo/" + std::string(f.name)))
          open_source(app, label);
      }
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Recent")) {
      if (app.recent.empty()) ImGui::TextDisabled("no recent files");
      for (const std::string& r : app.recent)
        if (ImGui::Selectable(
                (fit_text(r, ImGui::GetContentRegionAvail().x) + "###" + r).c_str())) {
          const std::string copy = r;  // open_source reorders the list
          open_source(app, copy);
          break;
        }
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::EndDisabled();
  ImGui::End();
}

}  // namespace castscope::gui
