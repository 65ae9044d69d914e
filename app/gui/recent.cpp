#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app_state.hpp"

namespace castscope::gui {

namespace {

std::filesystem::path recent_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path base =
      xdg && *xdg ? xdg : (home && *home ? std::filesystem::path(home) / ".config" : "");
  if (base.empty()) return {};
  return base / "castscope" / "recent.json";
}

}  // namespace

std::vector<std::string> load_recent() {
  std::vector<std::string> out;
  const auto p = recent_path();
  if (p.empty()) return out;
  std::ifstream f(p);
  if (!f) return out;
  // A damaged file only costs the list: it is rewritten on the next open.
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("recent") || !j["recent"].is_array()) return out;
  for (const auto& e : j["recent"])
    if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

void remember_recent(AppState& app, const std::string& path) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).string();
  const std::string& key = ec ? path : abs;
  std::erase(app.recent, key);
  app.recent.insert(app.recent.begin(), key);
  if (app.recent.size() > 12) app.recent.resize(12);
  const auto p = recent_path();
  if (p.empty()) return;
  try {
    std::filesystem::create_directories(p.parent_path());
    const std::string text = nlohmann::json{{"recent", app.recent}}.dump(2) + "\n";
    io::write_atomically(p.string(), [&](const auto& put) { put(text.data(), text.size()); });
  } catch (const std::exception& e) {
    app.note(std::string("could not save the recent files list: ") + e.what());
  }
}

}  // namespace castscope::gui
