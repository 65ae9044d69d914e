// Tensor-core GEMMs through cuBLASLt (GPU builds), timed and checked against an fp64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope {

// MXFP8Block (32-value e8m0 scales) and NVFP4Block (16-value e4m3 scales over e2m1) are the
// Blackwell block-scaled modes: run_gemm says plainly that they need sm_100.
// TCFP12Weights: TCFP-12 weights (B = W_hi + W_lo) times FP8 e4m3 activations with a per-tensor
// scale (A), as the TCFP package runs its layers on tensor cores; one FP8 GEMM over 2k.
// FP8Channel: FP8 e4m3 with one fp32 scale per row of A and per column of the output (B's rows),
// cuBLASLt's outer-vector scale mode.
enum class GemmKind {
  BF16,
  FP8,
  FP8Block,
  TCFP12,
  TCFP16,
  MXFP8Block,
  NVFP4Block,
  TCFP12Weights,
  FP8Channel
};
const char* to_string(GemmKind k);

struct GemmOptions {
  int m = 4096, n = 4096, k = 4096;
  uint64_t seed = 1;
  int warmup = 3;
  int iters = 10;
  bool check = true;         // relative error against an fp64 reference on a sampled block of C
  bool bf16_output = false;  // D (and C) in bf16 instead of fp32 (BF16, FP8, FP8Block, ...)
  // cuBLASLt heuristic candidates timed before the measurement, the fastest kept (0: its first).
  int autotune = 0;
};

struct GemmResult {
  GemmKind kind = GemmKind::BF16;
  int m = 0, n = 0, k = 0;
  double ms = 0;         // median time of one GEMM (all its terms)
  double tflops = 0;     // 2mnk / time
  double rel_error = 0;  // ||C - C_ref|| / ||C_ref|| on the checked block
  // The same block against the exact (fp64, CPU) product of the operands as the GPU multiplied
  // them: decoded codes times their scales. It isolates the GEMM's own accumulation and output
  // rounding from the quantization error; -1 where not computed (TCFP).
  double product_rel_error = -1;
  std::string note;  // e.g. the cuBLASLt algorithm, or why a kind is unavailable
};

// True when GEMMs can run here (CUDA build and a GPU with FP8 tensor cores); else reason says why.
bool gemm_available(std::string* reason = nullptr);
// The GPU's compute capability as 10 * major + minor (90 for Hopper); 0 without a usable GPU.
int gemm_compute_capability();
// Runs one GEMM kind on random N(0,1) inputs. Throws Error when unavailable or out of memory.
GemmResult run_gemm(GemmKind kind, const GemmOptions& opt, JobControl* job = nullptr);

}  // namespace castscope
