// The cuBLASLt GEMM on given device operands, shared by run_gemm (random operands, timings) and
// the linear-layer error (CastScope's cast codes and scales). Not a public API.
#pragma once

#include <cstdint>
#include <string>

#include "backends/device_api.hpp"

namespace castscope::gpu::detail {

// How cuBLASLt applies an operand's fp32 scales: none, one per tensor, 1x128 blocks along K
// (VEC128_32F) or 128x128 blocks (BLK128x128_32F). Block scales are in lt_block_scales' layout.
// OuterVec: one fp32 scale per row of the operand (per row of A, per output column for B),
// cuBLASLt's OUTER_VEC_32F.
enum class LtScale { None, Tensor, Vec128, Blk128x128, OuterVec };

struct LtOperand {
  DeviceTensor data;  // rows x k, K contiguous: F32, BF16, F8E4M3 or F8E5M2
  DeviceTensor scale;
  LtScale scaling = LtScale::None;
};

struct LtGemm {
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  bool fast_accum = false;  // FP8 only: no periodic promotion of the tensor-core sums to fp32
  bool bf16_output = false;
  int warmup = 0, iters = 1;  // launches before timing, timed launches (median reported)
  // Candidates from cuBLASLt's heuristic to time before the timed launches, the fastest kept;
  // 0 or 1: its first choice.
  int autotune = 0;
  // Accumulate into an existing D: D = alpha A B^T + beta D. `accumulate` holds D.
  float beta = 0.0f;
  DeviceTensor accumulate;
  std::string what;  // names the GEMM in errors
};

// D = alpha * (A scaled)(B scaled)^T for A [m, k] and B [n, k]: D is [n, m] row-major (m x n
// column-major), fp32 or bf16. *ms receives the median time of one timed launch. Throws Error
// when cuBLASLt has no algorithm for the operand types and sizes.
DeviceTensor lt_matmul(const LtOperand& a, const LtOperand& b, const LtGemm& g, JobControl* job,
                       double* ms, std::string* algo = nullptr);

// One prepared cuBLASLt product (descriptors, algorithm, workspace), launched as often as wanted:
// for timings of several products together (a second one accumulating into the first).
class LtProduct {
 public:
  LtProduct(const LtOperand& a, const LtOperand& b, const LtGemm& g);
  ~LtProduct();
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;
  // D = alpha A B^T + beta D on the current stream; D is [n, m] as lt_matmul returns it.
  void launch(DeviceTensor& d) const;
  DeviceTensor make_output() const;
  std::string algo_note() const;  // which heuristic candidate ran (autotune)

 private:
  struct Impl;
  Impl* impl_;
};

// Per-block scales [rblocks, kblocks] (rows of blocks, K blocks) in the layout cuBLASLt reads:
// Vec128 (rblocks = rows) with the rows contiguous over `rows_padded` rows, Blk128x128 with the
// K blocks of each row of blocks contiguous and padded to a multiple of 4.
DeviceTensor lt_block_scales(const DeviceTensor& raw, int64_t rblocks, int64_t kblocks,
                             LtScale layout, int64_t rows_padded);

// float32 -> bfloat16, round to nearest even.
DeviceTensor to_bf16(const DeviceTensor& f32);

// The TCFP matmul operand (gemm_cuda.cu's header): the hi, hi/16 and lo terms of a TCFP-12 /
// TCFP-16 Actual cast folded into one e4m3 row of 3k values at the scale 2^shift_s, in A order
// (hi | hi/16 | lo) or B order (hi | lo | hi/16).
DeviceTensor tcfp_fold_operand(const DeviceCastResult& r, bool tcfp16, bool b_order, int& shift_s);

// TCFP-12 weights for the weights x FP8 activations GEMM: [hi at 2^shift_s | lo at
// 2^(shift_s - 4)] as one e4m3 row of 2k values; the activations' second half is x / 16.
DeviceTensor tcfp_fold_weights_operand(const DeviceCastResult& r, int& shift_s);

}  // namespace castscope::gpu::detail
