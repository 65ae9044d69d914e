// castscope-bench's cast table, shared by the CUDA and CPU-only builds: both check --only alike.
#include <algorithm>

#include "backends/device_api.hpp"
#include "castscope/error.hpp"

namespace castscope::gpu {

const std::vector<std::string>& bench_cast_names() {
  static const std::vector<std::string> names = {
      "mxfp8e4",     "mxfp8e5",  "mxfp6e2",      "mxfp6e3",       "mxfp4e2", "mxint8",
      "bfp16",       "nvfp4",    "tcfp8",        "tcfp12",        "tcfp16",  "float8_e4m3fn",
      "float8_e5m2", "bfloat16", "icb44fi4_e32", "icb44fi3_f32s8"};
  return names;
}

void check_bench_options(const BenchOptions& opt) {
  const std::vector<std::string>& names = bench_cast_names();
  for (const std::string& name : opt.only)
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string all;
      for (const std::string& c : names) all += (all.empty() ? "" : ", ") + c;
      throw Error("bench: '" + name + "' is not one of the timed casts (" + all + ")");
    }
}

}  // namespace castscope::gpu
