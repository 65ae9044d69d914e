// The device checks of the cast kernels' fast paths (verify_fast_paths.cu, verify_pairs.cu),
// built into the GPU tests when the CUDA backend is (CASTSCOPE_HAVE_CUDA).
#pragma once

#include <cstdint>

#include "castscope/scalar.hpp"

namespace castscope::gpu::detail {

// Checks the fast round-to-nearest-even quantizer against scalar::quantize on the device: every
// finite float32 bit pattern (as a float and as a double) plus `extra` random doubles. Returns the
// number of mismatches; `first_bad` receives one mismatching input. Throws Error without a GPU.
uint64_t verify_fast_quantizer(const scalar::Format& f, uint64_t extra, uint64_t seed,
                               double* first_bad);

// Checks the bfloat16 code function against scalar::quantize on every finite float32, under both
// overflow policies. Returns the number of mismatches; first_bad receives one input's bits and
// checked the number of inputs compared.
uint64_t verify_bf16_codes(uint32_t* first_bad, uint64_t* checked);

// Checks the lean kernel's two-at-a-time bfloat16 codes (bf16_pairs.cuh) on every finite bfloat16
// in either half of a word (the other half holds a different pattern): the e2m1, e2m3 and int8
// lines against scalar::quantize for shifts -130..130 (those the lines take), and NVFP4's packed
// thresholds against the float threshold codes for every positive e4m3 tile scale under 14 tensor
// scales (float's subnormal edge to 2^100, significands from seed). Returns the number of
// mismatches; first_bad receives one's work index, checked the number of comparisons.
uint64_t verify_bf16_pair_codes(uint64_t seed, uint64_t* first_bad, uint64_t* checked);

// Checks the lean TCFP kernel's float paths on every positive finite float32 a against the shared
// code, for the data grid `data` (e4m3fn, the main term, or int4, TCFP-12's residual): the block
// scale code of a (block_scale_code_f32 against tcb::block_scale_code) and, for an integer grid,
// the residual code bytes of a and -a (int_fixed_byte against scalar::quantize). Returns the
// number of mismatching inputs; first_bad receives one one's bits. Throws Error without a GPU.
uint64_t verify_tcfp_fast_paths(const scalar::Format& data, uint32_t* first_bad);

}  // namespace castscope::gpu::detail
