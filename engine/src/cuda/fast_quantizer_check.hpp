// The device check of the fast quantizer, declared without CUDA headers so that the engine's
// no-CUDA stub and the GPU tests see the same declaration on machines without the toolkit.
#pragma once

#include <cstdint>

#include "castscope/scalar.hpp"

namespace castscope::gpu::detail {

// Checks the fast round-to-nearest-even quantizer against scalar::quantize on the device: every
// finite float32 bit pattern (as a float and as a double) plus `extra` random doubles. Returns the
// number of mismatches; `first_bad` receives one mismatching input. Throws Error without a GPU.
uint64_t verify_fast_quantizer(const scalar::Format& f, uint64_t extra, uint64_t seed,
                               double* first_bad);
bool fast_quantizer_applies(const scalar::Format& f);

}  // namespace castscope::gpu::detail
