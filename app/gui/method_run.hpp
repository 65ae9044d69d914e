// The composer's quantization method (rtn | gptq | mse | awq and its options) with its
// calibration inputs, and what the method job computes: round to nearest beside the method for
// the same datatype, weight SNR and layer output error on the calibration (actions_method.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "castscope/method.hpp"
#include "castscope/metrics.hpp"

namespace castscope::gui {

struct MethodSettings {
  MethodOptions opt;  // opt.method: the method; rtn shows the plain cast alone
  // Calibration inputs [tokens, in] for the loaded tensor: a .npy file, or (empty path) the
  // synthetic generator of the activations panel with a recorded seed.
  char calib_path[512] = "";
  int calib_tokens = 256, calib_outliers = 8, calib_seed = 1;
  float calib_outlier_scale = 20.0f;
  char calib_edit[512] = "";  // the path box while it is edited (applied on Enter)
};

// One datatype: round to nearest and the method on the same tensor and calibration.
struct MethodRow {
  std::string dtype;  // canonical string
  std::string name;   // the registry's name where it has one, else the canonical string
  std::string error;  // the method refused this datatype or tensor (why)
  Stats rtn, method;  // weight statistics against the original
  // ||X W^T - X Q^T|| / ||X W^T|| on the calibration inputs, and the method's absolute
  // ||X W^T - X Q^T|| (gptq / awq: as `castscope-cli cast --method` prints it).
  double rtn_out_relerr = 0, method_out_relerr = 0, method_output_error = 0;
  // For the teaching view (the composer's datatype only): the method's values and the nearest
  // values on the method's own scales (cast_with_scales of the original weight), input shape;
  // how many elements the method moved off their nearest code.
  // The element codes of both (input shape where the datatype stores one code per element).
  Tensor values, nearest, codes, nearest_codes;
  int64_t moved = 0;
};

struct MethodRun {
  std::string key;                    // inputs it was computed for
  std::string tensor, method, calib;  // calib: the file, or "synthetic T x IN, seed S, ..."
  int64_t tokens = 0, in = 0;
  std::vector<MethodRow> rows;  // the composer's datatype first, then each pinned one
};

}  // namespace castscope::gui
