// Device memory: a stream-ordered pool (freed blocks are kept for the next cast of the same size),
// DeviceTensor, and the axis permutation kernel used to bring tile axes last on the device.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "backends/device_api.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"

namespace castscope::gpu {
namespace detail {

cudaStream_t stream() {
  return cudaStreamPerThread;
}

void* device_alloc(size_t bytes) {
  static std::once_flag once;
  std::call_once(once, [] {
    int dev = 0;
    cudaMemPool_t pool;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
      uint64_t keep = ~0ull;  // keep freed memory in the pool instead of returning it
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    cudaGetLastError();
  });
  void* p = nullptr;
  if (bytes == 0) bytes = 1;
  cudaError_t err = cudaMallocAsync(&p, bytes, stream());
  if (err == cudaErrorMemoryAllocation) {
    // The pool may hold freed blocks of other sizes: give them back and try once more.
    cudaGetLastError();
    int dev = 0;
    cudaMemPool_t pool;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
      cudaStreamSynchronize(stream());
      cudaMemPoolTrimTo(pool, 0);
    }
    err = cudaMallocAsync(&p, bytes, stream());
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error("out of GPU memory: cannot allocate " + std::to_string(bytes >> 20) + " MiB (" +
                cudaGetErrorString(err) + ")");
  }
  return p;
}

void device_free(void* p) {
  // Called from destructors (possibly after the context is gone at exit): nothing to report to.
  if (p && cudaFreeAsync(p, stream()) != cudaSuccess) cudaGetLastError();
}

namespace {

constexpr int kMaxRank = 8;
struct PermArgs {
  int rank;
  int64_t pshape[kMaxRank];
  int64_t pstride[kMaxRank];  // source stride of permuted axis i
};

// dst (permuted order, contiguous) <- src (original order), or the reverse when `inverse`.
template <class E>
__global__ void permute_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t n,
                               PermArgs a, bool inverse) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = k, off = 0;
    for (int i = a.rank - 1; i >= 0; --i) {
      const int64_t idx = rem % a.pshape[i];
      rem /= a.pshape[i];
      off += idx * a.pstride[i];
    }
    if (!inverse)
      dst[k] = src[off];
    else
      dst[off] = src[k];
  }
}

}  // namespace

void permute_device(const void* src, void* dst, size_t esize, const Shape& shape,
                    const std::vector<int>& perm, bool inverse) {
  const int r = static_cast<int>(shape.size());
  if (r > kMaxRank) throw Error("GPU permutation supports up to 8 dimensions");
  PermArgs a{};
  a.rank = r;
  int64_t s = 1;
  int64_t sstride[kMaxRank];
  for (int i = r - 1; i >= 0; --i) {
    sstride[i] = s;
    s *= shape[i];
  }
  for (int i = 0; i < r; ++i) {
    a.pshape[i] = shape[perm[i]];
    a.pstride[i] = sstride[perm[i]];
  }
  const int64_t n = numel(shape);
  const unsigned grid = grid_for(n, 256, 1 << 16);
  switch (esize) {
    case 1:
      permute_kernel<uint8_t><<<grid, 256, 0, stream()>>>(
          static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), n, a, inverse);
      break;
    case 2:
      permute_kernel<uint16_t><<<grid, 256, 0, stream()>>>(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), n, a, inverse);
      break;
    case 4:
      permute_kernel<uint32_t><<<grid, 256, 0, stream()>>>(
          static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), n, a, inverse);
      break;
    default:
      permute_kernel<uint64_t><<<grid, 256, 0, stream()>>>(
          static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), n, a, inverse);
      break;
  }
  CS_CUDA_LAUNCH("permute_kernel");
}

}  // namespace detail

DeviceTensor DeviceTensor::empty(DType dtype, Shape shape, bool zero) {
  for (int64_t d : shape)
    if (d < 0) throw Error("negative dimension in shape " + shape_str(shape));
  DeviceTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  void* p = detail::device_alloc(bytes);
  t.mem_ = std::shared_ptr<void>(p, [](void* q) { detail::device_free(q); });
  if (zero) CS_CUDA(cudaMemsetAsync(p, 0, bytes ? bytes : 1, detail::stream()));
  return t;
}

namespace {
std::atomic<uint64_t> g_uploads{0}, g_downloads{0}, g_upload_bytes{0}, g_download_bytes{0};
}  // namespace

TransferCounters transfer_counters() {
  TransferCounters c;
  c.uploads = g_uploads.load();
  c.downloads = g_downloads.load();
  c.upload_bytes = g_upload_bytes.load();
  c.download_bytes = g_download_bytes.load();
  return c;
}

void synchronize() {
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
}

DeviceTensor DeviceTensor::borrow(DType dtype, Shape shape, std::shared_ptr<void> owner,
                                  void* data) {
  for (int64_t d : shape)
    if (d < 0) throw Error("negative dimension in shape " + shape_str(shape));
  if (!data && castscope::numel(shape) > 0) throw Error("cannot borrow a null device pointer");
  cudaPointerAttributes attr{};
  if (data &&
      (cudaPointerGetAttributes(&attr, data) != cudaSuccess || attr.type != cudaMemoryTypeDevice)) {
    cudaGetLastError();
    throw Error("cannot borrow memory that is not on a CUDA device");
  }
  int dev = 0;
  if (data && cudaGetDevice(&dev) == cudaSuccess && attr.device != dev)
    throw Error("the tensor is on CUDA device " + std::to_string(attr.device) +
                ", the engine runs on device " + std::to_string(dev));
  DeviceTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.mem_ = std::shared_ptr<void>(std::move(owner), data);
  return t;
}

DeviceTensor DeviceTensor::upload(const Tensor& host) {
  if (!host) throw Error("cannot upload an undefined tensor");
  g_uploads++;
  g_upload_bytes += host.nbytes();
  DeviceTensor t = empty(host.dtype(), host.shape());
  CS_CUDA(cudaMemcpyAsync(t.mutable_data(), host.data(), host.nbytes(), cudaMemcpyHostToDevice,
                          detail::stream()));
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
  return t;
}

Tensor DeviceTensor::download() const {
  if (!mem_) return Tensor();
  g_downloads++;
  g_download_bytes += nbytes();
  Tensor h = Tensor::empty(dtype_, shape_);
  CS_CUDA(cudaMemcpyAsync(h.mutable_data(), data(), nbytes(), cudaMemcpyDeviceToHost,
                          detail::stream()));
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
  return h;
}

Tensor DeviceTensor::download_block(int64_t r0, int64_t c0, int64_t h, int64_t w) const {
  const int64_t cols = shape_.empty() ? 1 : shape_.back();
  const int64_t rows = cols ? numel() / cols : 0;
  if (!mem_ || r0 < 0 || c0 < 0 || h < 0 || w < 0 || r0 >= rows || c0 >= cols)
    throw Error("block at (" + std::to_string(r0) + ", " + std::to_string(c0) +
                ") is outside the " + std::to_string(rows) + " x " + std::to_string(cols) +
                " view of the device tensor");
  const int64_t bh = std::min(h, rows - r0), bw = std::min(w, cols - c0);
  const size_t es = dtype_size(dtype_);
  Tensor t = Tensor::empty(dtype_, {bh, bw});
  if (bh && bw)
    CS_CUDA(cudaMemcpy2DAsync(t.mutable_data(), bw * es,
                              static_cast<const char*>(data()) + (r0 * cols + c0) * es, cols * es,
                              bw * es, bh, cudaMemcpyDeviceToHost, detail::stream()));
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
  return t;
}

DeviceTensor DeviceTensor::reshaped(Shape shape) const {
  if (castscope::numel(shape) != numel())
    throw Error("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  DeviceTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

CastResult DeviceCastResult::download() const {
  CastResult r;
  r.dtype = dtype;
  r.options = options;
  r.shape = shape;
  r.mode = mode;
  r.backend = "cuda";
  r.values = values.download();
  r.codes = codes.download();
  r.scale = scale.download();
  r.zero = zero.download();
  r.tenscale = tenscale.download();
  r.meta = meta.download();
  r.mask = mask.download();
  r.residual = residual.download();
  r.residual_scale = residual_scale.download();
  r.counts = counts;
  if (mode == CastMode::Virtual) return r;
  if (options.mode == CastMode::Compress && mode == CastMode::Actual) {
    r.values = Tensor();
    r = castscope::pack(r);
  }
  if (options.mode != CastMode::Virtual) r.values = Tensor();
  r.options.mode = options.mode;
  r.mode = options.mode;
  return r;
}

}  // namespace castscope::gpu

#include "backends/backend.hpp"

namespace castscope::gpu {

bool available(std::string* reason) {
  return castscope::cuda::available(reason, nullptr);
}

}  // namespace castscope::gpu
