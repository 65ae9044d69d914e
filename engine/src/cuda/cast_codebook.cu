// Codebook casts on the GPU: one thread per tile running encode_tile of codebook/cb_block.hpp,
// the code the CPU engine runs, so both give the same codes, mappings and values.
#include <vector>

#include "codebook/cb_cast.hpp"
#include "cuda/cuda_common.hpp"

namespace castscope::codebook {
namespace {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t n) {
    if (n) CS_CUDA(cudaMalloc(&ptr, n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

__global__ void codebook_kernel(const double* __restrict__ x, int64_t C, int64_t gc, int64_t groups,
                                detail::cb::Params p, int64_t subs_per_row, uint8_t* codes,
                                float* values, uint8_t* meta, uint32_t* scale,
                                unsigned long long* counts) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long clipped = 0, nonfinite = 0;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += stride) {
    const int64_t row = g / gc, c0 = (g % gc) * p.tile;
    const int n = C - c0 < p.tile ? static_cast<int>(C - c0) : p.tile;
    const int64_t first = row * C + c0;
    const detail::cb::TileResult r = detail::cb::encode_tile(
        p, x + first, n, subs_per_row, row, c0, codes ? codes + first : nullptr,
        values ? values + first : nullptr, meta);
    if (scale) scale[g] = r.scale_code;
    clipped += r.clipped;
    nonfinite += r.nonfinite;
  }
  if (clipped) atomicAdd(counts, clipped);
  if (nonfinite) atomicAdd(counts + 1, nonfinite);
}

}  // namespace

CastResult cast_cuda(const Tensor& x, const DataType& d, const CastOptions& opt) {
  const Layout l = make_layout(x.shape(), d, opt);
  const detail::CastPlan& p = l.plan;
  const Tensor src = permuted_input(x, l);
  const int64_t n = p.numel(), groups = p.B * p.R * p.gc;
  std::vector<double> xd(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    xd[i] = src.dtype() == DType::F64 ? src.ptr<double>()[i] : src.ptr<float>()[i];
  const bool actual = opt.mode != CastMode::Virtual;
  DeviceBuffer<double> dx(n), dmags(l.mags.size());
  DeviceBuffer<uint8_t> dcodes(actual ? n : 0), dmeta(actual ? numel(l.meta_perm_shape) : 0);
  DeviceBuffer<float> dvalues(actual ? 0 : n);
  DeviceBuffer<uint32_t> dscale(actual ? groups : 0);
  DeviceBuffer<unsigned long long> dcounts(2);
  CS_CUDA(cudaMemcpy(dx.ptr, xd.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  CS_CUDA(
      cudaMemcpy(dmags.ptr, l.mags.data(), l.mags.size() * sizeof(double), cudaMemcpyHostToDevice));
  CS_CUDA(cudaMemset(dcounts.ptr, 0, 2 * sizeof(unsigned long long)));
  if (actual) CS_CUDA(cudaMemset(dmeta.ptr, 0, numel(l.meta_perm_shape)));
  detail::cb::Params cp = l.base;
  cp.mags = dmags.ptr;
  const int threads = 128;
  const int64_t want = (groups + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 ? want : 65535);
  codebook_kernel<<<blocks, threads>>>(dx.ptr, p.C, p.gc, groups, cp, l.subs_per_row, dcodes.ptr,
                                       dvalues.ptr, dmeta.ptr, dscale.ptr, dcounts.ptr);
  CS_CUDA_LAUNCH("codebook_kernel");
  CS_CUDA(cudaDeviceSynchronize());
  Tensor values, codes, scale, meta;
  unsigned long long counts[2];
  CS_CUDA(cudaMemcpy(counts, dcounts.ptr, sizeof(counts), cudaMemcpyDeviceToHost));
  if (actual) {
    codes = Tensor::empty(DType::U8, p.perm_shape);
    meta = Tensor::empty(DType::U8, l.meta_perm_shape);
    CS_CUDA(cudaMemcpy(codes.mutable_data(), dcodes.ptr, n, cudaMemcpyDeviceToHost));
    CS_CUDA(cudaMemcpy(meta.mutable_data(), dmeta.ptr, meta.numel(), cudaMemcpyDeviceToHost));
    std::vector<uint32_t> sc(static_cast<size_t>(groups));
    CS_CUDA(cudaMemcpy(sc.data(), dscale.ptr, groups * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    scale = Tensor::empty(p.scale_dtype, {groups});
    for (int64_t g = 0; g < groups; ++g)
      detail::store_code(scale.mutable_data(), p.scale_dtype, g, sc[g], p.scale);
  } else {
    values = Tensor::empty(DType::F32, p.perm_shape);
    CS_CUDA(
        cudaMemcpy(values.mutable_data(), dvalues.ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
  }
  CastCounts c;
  c.clipped = static_cast<int64_t>(counts[0]);
  c.nonfinite = static_cast<int64_t>(counts[1]);
  CastResult r = assemble(x, d, opt, l, values, codes, scale, meta, c);
  r.backend = "cuda";
  return r;
}

}  // namespace castscope::codebook
