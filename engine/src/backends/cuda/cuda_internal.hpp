// Engine-internal pieces of the CUDA backend shared between its sources (cast, statistics,
// benchmark). Not a public API.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/device_api.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"
#include "core/group.hpp"
#include "core/plan.hpp"

namespace castscope::gpu::detail {

// Calls f(Tag<T>{}) with T the device element type of a float input dtype; other dtypes are an
// Error saying what needed the float tensor.
template <class T>
struct Tag {
  using type = T;
};

template <class F>
void with_float(DType d, const char* what, F&& f) {
  switch (d) {
    case DType::F32:
      f(Tag<float>{});
      break;
    case DType::F64:
      f(Tag<double>{});
      break;
    case DType::F16:
      f(Tag<__half>{});
      break;
    case DType::BF16:
      f(Tag<__nv_bfloat16>{});
      break;
    default:
      throw Error(std::string(what) +
                  " needs a float32, float16, bfloat16 or float64 tensor (got " + dtype_name(d) +
                  ")");
  }
}

void permute_device(const void* src, void* dst, size_t esize, const Shape& shape,
                    const std::vector<int>& perm, bool inverse);
// A permuted-order device tensor (plan p) back in the input's axis order, shape `target`.
DeviceTensor restore_order(const DeviceTensor& t, const Shape& target,
                           const castscope::detail::CastPlan& p);
int sm_count();  // multiprocessors of the current device

// Codebook casts of a device tensor (cuda/cast_codebook.cu), run through CastRunner.
class CodebookRunner {
 public:
  CodebookRunner(const DeviceTensor& x, const DataType& dtype, const CastOptions& opt,
                 bool with_values);
  ~CodebookRunner();
  CodebookRunner(const CodebookRunner&) = delete;
  CodebookRunner& operator=(const CodebookRunner&) = delete;
  void run();
  DeviceCastResult result();  // Actual results: CastResult download() packs Compress ones
  // "codebook" (interval tables) or "codebook-tile" (encode_tile per thread).
  const char* path() const;
  double min_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
  // Which kernel family runs: "lean", "fast", "group", "elementwise", "tcfp", "codebook".
  const char* path() const;
  // Bytes the cast must read and write at least (input once, every output once).
  double min_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace castscope::gpu::detail
