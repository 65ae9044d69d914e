// --headless: load, cast with the chosen datatype, print a metrics summary. No window, no GL.
#include <cstdio>

#include "demo_assets.hpp"
#include "headless.hpp"

namespace castscope::gui {

int run_headless(const AppOptions& opt) {
  try {
    const std::string spec = opt.file.empty() ? "demo" : opt.file;
    std::string name;
    auto model = open_any(spec, &name);
    if (name.empty()) throw Error(spec + ": no tensors");
    const DataType d = DataType::parse(opt.dtype);
    const Tensor t = model->load(name);
    auto a = widgets::analyze(t, d, CastOptions{}, name);
    std::printf("tensor   %s %s (%s)\n", name.c_str(), shape_str(a->shape).c_str(),
                model->format().c_str());
    std::printf("datatype %s  %.4g bits per value  backend %s  views on the %s\n",
                d.label().c_str(), a->bits_per_value, a->backend.c_str(),
                a->on_device ? "GPU" : "CPU");
    std::printf("metrics  %s\n", stats_line(a->stats).c_str());
    if (a->tiles)
      std::printf("tiles    %lld x %lld of %lld x %lld\n", static_cast<long long>(a->tiles->rows),
                  static_cast<long long>(a->tiles->cols),
                  static_cast<long long>(a->tiles->tile_rows),
                  static_cast<long long>(a->tiles->tile_cols));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "castscope: %s\n", e.what());
    return 1;
  }
}

}  // namespace castscope::gui
