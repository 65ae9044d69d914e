// Checks what a scripted GUI session left behind: the JSON state the app wrote on quit and its
// PNG screenshots.
//   castscope_gui_check STATE.json [path.to.key=value ...] [path.to.key.min=NUMBER ...]
//                       [path.to.key.nonempty=0|1 ...] [allow_errors=1]
//                       [png=FILE ...] [file=FILE ...] [json=FILE ...] [regions=a-b,c-d]
// A key path compares the value at that path of the state (strings unquoted); png=FILE checks
// that the screenshot is not blank: many distinct colours overall, and in each region (vertical
// strips given as fractions of the width, default the three panel columns) a fair share of
// pixels differing from that strip's dominant colour.
#include <stb/stb_image.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "castscope/json_path.hpp"
#include "castscope/metrics_json.hpp"

namespace {

int failures = 0;

void fail(const std::string& msg) {
  std::fprintf(stderr, "FAIL: %s\n", msg.c_str());
  ++failures;
}

void check_png(const std::string& file, const std::vector<std::pair<double, double>>& regions) {
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(file.c_str(), &w, &h, &n, 4);
  if (!px) {
    fail(file + ": cannot read PNG (" + std::string(stbi_failure_reason()) + ")");
    return;
  }
  if (w < 800 || h < 600) fail(file + ": only " + std::to_string(w) + "x" + std::to_string(h));
  auto rgb = [&](int x, int y) {
    const unsigned char* p = px + (static_cast<size_t>(y) * w + x) * 4;
    return (p[0] << 16) | (p[1] << 8) | p[2];
  };
  std::set<int> all;
  for (int y = 0; y < h; y += 2)
    for (int x = 0; x < w; x += 2) all.insert(rgb(x, y));
  if (all.size() < 64)
    fail(file + ": only " + std::to_string(all.size()) + " distinct colours (blank?)");
  for (auto [a, b] : regions) {
    const int x0 = static_cast<int>(a * w), x1 = static_cast<int>(b * w);
    std::map<int, long> hist;
    long total = 0;
    for (int y = 0; y < h; ++y)
      for (int x = x0; x < x1; ++x) ++hist[rgb(x, y)], ++total;
    long dominant = 0;
    for (auto& [c, k] : hist) dominant = std::max(dominant, k);
    const double other = total ? 1.0 - static_cast<double>(dominant) / total : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: strip %.2f-%.2f has %zu colours, %.1f%% non-background",
                  file.c_str(), a, b, hist.size(), 100 * other);
    std::printf("%s\n", buf);
    if (hist.size() < 16 || other < 0.05) fail(std::string(buf) + " (looks empty)");
  }
  stbi_image_free(px);
}

// The number at `path`, read as metrics_json writes it: null is an exact (infinite) SNR where its
// flag beside it (or, in an array, the flag array beside it) says so, and NaN otherwise.
double number_at(const nlohmann::json& state, const std::string& path) {
  namespace mj = castscope::metrics_json;
  const nlohmann::json* v = castscope::json_at(state, path);
  if (!v) return std::numeric_limits<double>::quiet_NaN();
  if (!v->is_null()) return mj::number_from(*v);
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return std::numeric_limits<double>::quiet_NaN();
  const std::string parent = path.substr(0, dot), last = path.substr(dot + 1);
  const nlohmann::json* p = castscope::json_at(state, parent);
  if (p && p->is_object()) return mj::snr_from(*p, last);
  const size_t dot2 = parent.rfind('.');
  if (p && p->is_array() && dot2 != std::string::npos) {
    const nlohmann::json* flags = castscope::json_at(
        state, parent.substr(0, dot2 + 1) + mj::exact_key(parent.substr(dot2 + 1)) + "." + last);
    if (flags && flags->is_boolean() && flags->get<bool>())
      return std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: castscope_gui_check STATE.json [key=value ...] [png=FILE ...]\n");
    return 2;
  }
  std::ifstream f(argv[1]);
  if (!f) {
    std::fprintf(stderr, "FAIL: no state file %s (the app did not quit cleanly?)\n", argv[1]);
    return 1;
  }
  const nlohmann::json state = nlohmann::json::parse(f, nullptr, false);
  if (state.is_discarded()) {
    std::fprintf(stderr, "FAIL: %s is not JSON\n", argv[1]);
    return 1;
  }
  // Every session: no script errors, nothing left running, a finished analysis.
  if (!state["script_errors"].empty()) fail("script errors: " + state["script_errors"].dump());
  if (state["busy"].get<bool>()) fail("still busy at quit");
  if (state["analysis"].is_null()) fail("no analysis: " + state["analysis_error"].dump());
  // allow_errors=1: the session provokes errors on purpose and checks them itself.
  bool allow_errors = false;
  for (int i = 2; i < argc; ++i) allow_errors |= std::string(argv[i]) == "allow_errors=1";
  if (!allow_errors && !state["analysis_error"].get<std::string>().empty())
    fail("analysis error: " + state["analysis_error"].dump());
  std::vector<std::pair<double, double>> regions = {{0.0, 0.22}, {0.22, 0.47}, {0.47, 1.0}};
  std::vector<std::string> pngs;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      fail("bad expectation '" + arg + "'");
      continue;
    }
    const std::string key = arg.substr(0, eq), want = arg.substr(eq + 1);
    if (key == "allow_errors") {
      continue;
    } else if (key.size() > 9 && key.compare(key.size() - 9, 9, ".nonempty") == 0) {
      const nlohmann::json* v = castscope::json_at(state, key.substr(0, key.size() - 9));
      const bool nonempty = v && !v->is_null() &&
                            !(v->is_string() && v->get<std::string>().empty()) &&
                            !(v->is_array() && v->empty());
      if (nonempty != (want == "1")) fail(key + ": " + (v ? v->dump() : "missing"));
    } else if (key == "png") {
      pngs.push_back(want);
    } else if (key == "file") {
      std::ifstream in(want, std::ios::binary | std::ios::ate);
      if (!in || in.tellg() <= 0) fail(want + ": missing or empty");
    } else if (key == "json") {
      std::ifstream in(want);
      if (!in || nlohmann::json::parse(in, nullptr, false).is_discarded())
        fail(want + ": missing or not JSON");
    } else if (key == "regions") {
      regions.clear();
      std::stringstream ss(want);
      std::string r;
      while (std::getline(ss, r, ','))
        regions.emplace_back(std::stod(r.substr(0, r.find('-'))),
                             std::stod(r.substr(r.find('-') + 1)));
    } else if (key.size() > 4 && key.compare(key.size() - 4, 4, ".min") == 0) {
      const nlohmann::json* v = castscope::json_at(state, key.substr(0, key.size() - 4));
      const double got = number_at(state, key.substr(0, key.size() - 4));
      if (!v || std::isnan(got) || got < std::stod(want))
        fail(key + ": " + (v ? v->dump() : "missing") + " < " + want);
    } else {
      const nlohmann::json* v = castscope::json_at(state, key);
      const std::string got = !v ? "(missing)" : v->is_string() ? v->get<std::string>() : v->dump();
      if (got != want) fail(key + ": got " + got + ", want " + want);
    }
  }
  for (const std::string& p : pngs) check_png(p, regions);
  if (failures) return 1;
  std::printf("ok: %s\n", argv[1]);
  return 0;
}
