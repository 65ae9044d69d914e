// Engine-internal pieces of the CUDA backend shared between its sources (cast, statistics,
// benchmark). Not a public API.
#pragma once

#include <memory>
#include <vector>

#include "castscope/cuda_stats.hpp"
#include "group.hpp"
#include "plan.hpp"

namespace castscope::gpu::detail {

void permute_device(const void* src, void* dst, size_t esize, const Shape& shape,
                    const std::vector<int>& perm, bool inverse);

// A cast planned once and enqueued any number of times without host synchronisation (the tensor
// scale of multiscale datatypes and the scale of tensor-scoped ones are chosen on the device), so
// the benchmark can time run() alone with events.
class CastRunner {
 public:
  CastRunner(const DeviceTensor& x, const DataType& dtype, const CastOptions& opt,
             bool with_values);
  ~CastRunner();
  CastRunner(const CastRunner&) = delete;
  CastRunner& operator=(const CastRunner&) = delete;
  void run();                 // enqueue on detail::stream()
  DeviceCastResult result();  // synchronises, reads the counts, restores the input's axis order
  // Which kernel family runs: "fast", "group", "elementwise", "tcfp".
  const char* path() const;
  // Bytes the cast must read and write at least (input once, every output once).
  double min_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace castscope::gpu::detail

namespace castscope::gpu::detail {

// Checks the fast round-to-nearest-even quantizer against scalar::quantize on the device: every
// finite float32 bit pattern (as a float and as a double) plus `extra` random doubles. Returns the
// number of mismatches; `first_bad` receives one mismatching input. Throws Error without a GPU.
uint64_t verify_fast_quantizer(const scalar::Format& f, uint64_t extra, uint64_t seed,
                               double* first_bad);
bool fast_quantizer_applies(const scalar::Format& f);

}  // namespace castscope::gpu::detail
