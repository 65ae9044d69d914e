#include "castscope/matmul.hpp"

namespace castscope {

// Shared by the CUDA and CPU-only builds.
const char* to_string(GemmKind k) {
  switch (k) {
    case GemmKind::BF16:
      return "bf16";
    case GemmKind::FP8:
      return "fp8";
    case GemmKind::FP8Block:
      return "fp8-block";
    case GemmKind::TCFP12:
      return "tcfp12";
    case GemmKind::TCFP16:
      return "tcfp16";
    case GemmKind::MXFP8Block:
      return "mxfp8-block";
    case GemmKind::NVFP4Block:
      return "nvfp4-block";
    case GemmKind::TCFP12Weights:
      return "tcfp12-w";
    case GemmKind::FP8Channel:
      return "fp8-channel";
  }
  return "?";
}

}  // namespace castscope
