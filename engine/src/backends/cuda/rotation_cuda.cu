// Block Hadamard rotation on the GPU: one thread per block of n values, running the same CS_HD
// code as the CPU (rotation/hadamard.hpp), so both give identical bits.
#include "backends/cuda/cuda_common.hpp"
#include "rotation/hadamard.hpp"
#include "rotation/rotation_backend.hpp"

namespace castscope::cuda {
namespace {

__global__ void rotate_kernel(const float* src, float* dst, int n, float scale, bool signs,
                              uint64_t seed, int64_t len, int64_t inner, int64_t work,
                              bool inverse) {
  const int64_t blocks = len / n;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < work;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = w % inner;
    const int64_t b = (w / inner) % blocks;
    const int64_t o = w / (inner * blocks);
    const int64_t base = (o * len + b * n) * inner + in;
    float v[rotation::kMaxBlock];
    for (int j = 0; j < n; ++j) v[j] = src[base + j * inner];
    rotation::rotate_block(v, n, scale, signs, seed, b * n, inverse);
    for (int j = 0; j < n; ++j) dst[base + j * inner] = v[j];
  }
}

}  // namespace

Tensor rotate_f32(const Tensor& x, const Rotation& r, float scale, int64_t outer, int64_t len,
                  int64_t inner, bool inverse) {
  using gpu::detail::device_alloc;
  using gpu::detail::device_free;
  const size_t bytes = x.nbytes();
  float* d = static_cast<float*>(device_alloc(bytes * 2));
  Tensor out = Tensor::empty(DType::F32, x.shape());
  try {
    cudaStream_t s = gpu::detail::stream();
    CS_CUDA(cudaMemcpyAsync(d, x.data(), bytes, cudaMemcpyHostToDevice, s));
    const int64_t work = outer * (len / r.size) * inner;
    rotate_kernel<<<gpu::detail::grid_for(work, 128), 128, 0, s>>>(
        d, d + x.numel(), r.size, scale, r.random_signs, r.seed, len, inner, work, inverse);
    CS_CUDA_LAUNCH("rotate_kernel");
    CS_CUDA(cudaMemcpyAsync(out.mutable_data(), d + x.numel(), bytes, cudaMemcpyDeviceToHost, s));
    CS_CUDA(cudaStreamSynchronize(s));
  } catch (...) {
    device_free(d);
    throw;
  }
  device_free(d);
  return out;
}

}  // namespace castscope::cuda
