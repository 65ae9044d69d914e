// Helpers shared by the CUDA sources: checked CUDA calls (every failure becomes a castscope::Error,
// so the dispatcher can fall back to the CPU), element loads from every input dtype, and code
// stores matching plan.cpp's store_code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/error.hpp"
#include "castscope/scalar.hpp"
#include "castscope/tensor.hpp"

namespace castscope::gpu::detail {

[[noreturn]] inline void cuda_fail(cudaError_t err, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so later calls can run
  std::string msg = std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) msg = std::string("out of GPU memory in ") + what;
  (void)file;
  (void)line;
  throw Error(msg);
}

#define CS_CUDA(call)                                                          \
  do {                                                                         \
    cudaError_t cs_err_ = (call);                                              \
    if (cs_err_ != cudaSuccess)                                                \
      ::castscope::gpu::detail::cuda_fail(cs_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define CS_CUDA_LAUNCH(name)                                                  \
  do {                                                                        \
    cudaError_t cs_err_ = cudaGetLastError();                                 \
    if (cs_err_ != cudaSuccess)                                               \
      ::castscope::gpu::detail::cuda_fail(cs_err_, name, __FILE__, __LINE__); \
  } while (0)

// A grid-stride loop's first index for this thread and its step: a kernel over n elements runs
// for (int64_t i = grid_start(); i < n; i += grid_stride()).
__device__ __forceinline__ int64_t grid_start() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Stream-ordered allocation from a pool that keeps freed memory, so repeated casts of the same
// size cost no cudaMalloc. Throws Error when out of memory.
void* device_alloc(size_t bytes);
void device_free(void* p);
cudaStream_t stream();  // the stream every engine kernel runs on

// Median milliseconds of `iters` runs of f on the engine's stream, each bracketed by events,
// after `warm` untimed runs; the job (when given) is checked before each timed run.
template <class F>
double time_ms(F&& f, int warm, int iters, JobControl* job = nullptr) {
  for (int i = 0; i < warm; ++i) f();
  cudaEvent_t a, b;
  CS_CUDA(cudaEventCreate(&a));
  CS_CUDA(cudaEventCreate(&b));
  std::vector<float> t;
  try {
    for (int i = 0; i < iters; ++i) {
      if (job) job->check();
      CS_CUDA(cudaEventRecord(a, stream()));
      f();
      CS_CUDA(cudaEventRecord(b, stream()));
      CS_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CS_CUDA(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
  } catch (...) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    throw;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (t.empty()) return 0.0;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline unsigned grid_for(int64_t work, int per_block, int64_t cap = 1 << 20) {
  int64_t g = (work + per_block - 1) / per_block;
  if (g < 1) g = 1;
  return static_cast<unsigned>(g > cap ? cap : g);
}

// Input element as a double: every input dtype converts exactly (as the CPU's to_f32 does).
template <class T>
struct Load;
template <>
struct Load<float> {
  __device__ __forceinline__ static double get(const float* p, int64_t i) { return p[i]; }
};
template <>
struct Load<double> {
  __device__ __forceinline__ static double get(const double* p, int64_t i) { return p[i]; }
};
template <>
struct Load<__half> {
  __device__ __forceinline__ static double get(const __half* p, int64_t i) {
    return __half2float(p[i]);
  }
};
template <>
struct Load<__nv_bfloat16> {
  __device__ __forceinline__ static double get(const __nv_bfloat16* p, int64_t i) {
    return __bfloat162float(p[i]);
  }
};

// The same bytes plan.cpp's store_code writes: ints sign-extended into the storage width.
__device__ __forceinline__ void store_code(void* base, int size, int64_t i, uint32_t code,
                                           const scalar::Format& f) {
  if (f.kind == scalar::Kind::Int && f.bits < 32 && ((code >> (f.bits - 1)) & 1u))
    code |= ~((1u << f.bits) - 1);
  if (size == 1)
    static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(code);
  else if (size == 2)
    static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(code);
  else
    static_cast<uint32_t*>(base)[i] = code;
}

__device__ __forceinline__ uint32_t load_code(const void* base, int size, int64_t i,
                                              const scalar::Format& f) {
  uint32_t c;
  if (size == 1)
    c = static_cast<const uint8_t*>(base)[i];
  else if (size == 2)
    c = static_cast<const uint16_t*>(base)[i];
  else
    c = static_cast<const uint32_t*>(base)[i];
  return f.bits >= 32 ? c : c & ((1u << f.bits) - 1);
}

// Order-preserving key of a non-NaN double, for atomicMin / atomicMax.
__device__ __forceinline__ unsigned long long order_key(double v) {
  unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(v));
  return (u >> 63) ? ~u : (u | (1ull << 63));
}
__host__ __device__ inline double from_order_key(unsigned long long k) {
  unsigned long long u = (k >> 63) ? (k & ~(1ull << 63)) : ~k;
  return scalar::bits_double(u);
}

}  // namespace castscope::gpu::detail
