// castscope-cli imatrix IN [OUT --format gguf|dat] [--json]: reads llama-imatrix's importance
// matrix (GGUF or legacy .dat), lists its entries, and writes it in either of llama-imatrix's
// layouts.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "castscope/imatrix.hpp"
#include "cli/command.hpp"

namespace castscope::cli {
namespace {

struct ImatrixArgs {
  std::string in, out, format;
  bool json = false;
};

void imatrix_cmd(CLI::App& app) {
  static ImatrixArgs a;
  auto* sub = app.add_subcommand(
      "imatrix",
      "Read llama-imatrix's importance matrix (.gguf or legacy .dat), list or convert it");
  sub->add_option("input", a.in, "Importance matrix (GGUF or legacy .dat)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("output", a.out, "Write it here (in --format)");
  sub->add_option("--format", a.format, "gguf | dat (default: by the output's suffix)")
      ->check(CLI::IsMember({"gguf", "dat"}));
  sub->add_flag("--json", a.json, "List the entries as JSON");
  sub->callback([] {
    const io::Imatrix m = io::read_imatrix(a.in);
    if (!a.out.empty()) {
      const bool dat = a.format.empty()
                           ? a.out.size() >= 4 && a.out.substr(a.out.size() - 4) == ".dat"
                           : a.format == "dat";
      io::write_imatrix(a.out, m, dat);
      return;
    }
    nlohmann::json j = nlohmann::json::array();
    if (!a.json)
      std::printf("%s: %s, %zu entries, %d chunks of %d, datasets:", a.in.c_str(),
                  m.legacy ? "legacy .dat" : "GGUF", m.entries.size(), m.chunk_count, m.chunk_size);
    if (!a.json)
      for (const std::string& d : m.datasets) std::printf(" %s", d.c_str());
    if (!a.json) std::printf("\n");
    for (const auto& [name, e] : m.entries) {
      const std::vector<float> w = m.weights(name);
      double sum = 0, top = 0;
      for (const float v : w) sum += v, top = std::max(top, static_cast<double>(v));
      const size_t sets = e.counts.size();
      if (a.json) {
        j.push_back({{"name", name},
                     {"sets", sets},
                     {"columns", e.sums.size() / sets},
                     {"counts", e.counts},
                     {"mean", w.empty() ? 0.0 : sum / static_cast<double>(w.size())},
                     {"max", top}});
      } else {
        std::printf("%-40s %zu x %zu  mean %.6g  max %.6g\n", name.c_str(), sets,
                    e.sums.size() / sets, w.empty() ? 0.0 : sum / static_cast<double>(w.size()),
                    top);
      }
    }
    if (a.json) std::printf("%s\n", j.dump(1).c_str());
  });
}

Register reg(imatrix_cmd);

}  // namespace
}  // namespace castscope::cli
