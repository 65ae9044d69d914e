// Tensor-core GEMMs through cuBLASLt (GPU builds), timed and checked against an fp64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope {

enum class GemmKind { BF16, FP8, FP8Block, TCFP12, TCFP16 };
const char* to_string(GemmKind k);

struct GemmOptions {
  int m = 4096, n = 4096, k = 4096;
  uint64_t seed = 1;
  int warmup = 3;
  int iters = 10;
  bool check = true;  // relative error against an fp64 reference on a sampled block of C
};

struct GemmResult {
  GemmKind kind = GemmKind::BF16;
  int m = 0, n = 0, k = 0;
  double ms = 0;         // median time of one GEMM (all its terms)
  double tflops = 0;     // 2mnk / time
  double rel_error = 0;  // ||C - C_ref|| / ||C_ref|| on the checked block
  std::string note;      // e.g. the cuBLASLt algorithm, or why a kind is unavailable
};

// True when GEMMs can run here (CUDA build and a GPU with FP8 tensor cores); else reason says why.
bool gemm_available(std::string* reason = nullptr);
// Runs one GEMM kind on random N(0,1) inputs. Throws Error when unavailable or out of memory.
GemmResult run_gemm(GemmKind kind, const GemmOptions& opt, JobControl* job = nullptr);

}  // namespace castscope
