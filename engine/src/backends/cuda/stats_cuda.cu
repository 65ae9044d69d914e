// Statistics of device-resident tensors (backends/device_api.hpp). Each mirrors its host
// function in metrics/stats.cpp element for element; only the order of the floating-point sums
// differs (block partials added in a fixed order, so repeated runs agree with each other).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/plan.hpp"
#include "metrics/error_sums.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"

namespace castscope::gpu {
namespace detail {
namespace {

using castscope::detail::KernelParams;

using Acc = castscope::detail::ErrorSums;

constexpr int kStatBlocks = 1024;

template <class T>
__global__ void __launch_bounds__(256)
    stats_kernel(const T* __restrict__ x, const float* __restrict__ q, int64_t n, Acc* partial) {
  Acc a{};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a.add(Load<T>::get(x, i), q[i]);
  __shared__ Acc part[256];
  part[threadIdx.x] = a;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      part[threadIdx.x].merge(part[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

// Histogram of values (or of q - x over finite x when `x` is given). Counts per block in shared
// memory when the bins fit, then one atomic per bin and block. extra: below, above, nonfinite,
// zeros.
__global__ void __launch_bounds__(256)
    hist_kernel(const float* __restrict__ v, const float* __restrict__ x, int64_t n, double lo,
                double hi, double scale, int bins, bool log_x, unsigned long long* counts,
                bool use_shared) {
  extern __shared__ unsigned int sh[];
  if (use_shared) {
    for (int b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0;
    __syncthreads();
  }
  unsigned long long below = 0, above = 0, nonfinite = 0, zeros = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double val;
    if (x) {
      if (!isfinite(x[i])) continue;
      const float e = __fsub_rn(v[i], x[i]);
      val = e;
    } else {
      val = v[i];
    }
    if (!isfinite(val)) {
      ++nonfinite;
      continue;
    }
    if (log_x) {
      if (val == 0) {
        ++zeros;
        continue;
      }
      val = log2(fabs(val));
    }
    if (val < lo) {
      ++below;
      continue;
    }
    if (val > hi) {
      ++above;
      continue;
    }
    int64_t b = static_cast<int64_t>((val - lo) * scale);
    if (b >= bins) b = bins - 1;
    if (use_shared)
      atomicAdd(&sh[b], 1u);
    else
      atomicAdd(&counts[b], 1ull);
  }
  if (use_shared) {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
      if (sh[b]) atomicAdd(&counts[b], static_cast<unsigned long long>(sh[b]));
  }
  if (below) atomicAdd(&counts[bins], below);
  if (above) atomicAdd(&counts[bins + 1], above);
  if (nonfinite) atomicAdd(&counts[bins + 2], nonfinite);
  if (zeros) atomicAdd(&counts[bins + 3], zeros);
}

constexpr int kExpMin = -149, kExpBins = 127 - (-149) + 1;

__global__ void __launch_bounds__(256)
    exp_hist_kernel(const float* __restrict__ v, int64_t n, unsigned long long* counts) {
  __shared__ unsigned int sh[kExpBins + 2];
  for (int b = threadIdx.x; b < kExpBins + 2; b += blockDim.x) sh[b] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t u = __float_as_uint(v[i]) & 0x7FFFFFFFu;
    const int e = static_cast<int>(u >> 23);
    if (e == 255) {
      atomicAdd(&sh[kExpBins + 1], 1u);
      continue;
    }
    if (u == 0) {
      atomicAdd(&sh[kExpBins], 1u);
      continue;
    }
    // ilogb: the binade, also for subnormals (from the leading mantissa bit).
    const int lb = e ? e - 127 : (31 - __clz(u)) - 149;
    atomicAdd(&sh[lb - kExpMin], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kExpBins + 2; b += blockDim.x)
    if (sh[b]) atomicAdd(&counts[b], static_cast<unsigned long long>(sh[b]));
}

// |v| of finite floats compares as its bit pattern, so an integer atomicMax gives the exact
// maximum whatever the order.
__global__ void __launch_bounds__(256)
    absmax_kernel(const float* __restrict__ v, int64_t n, unsigned* out) {
  unsigned m = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned u = __float_as_uint(v[i]) & 0x7FFFFFFFu;
    if (u < 0x7F800000u && u > m) m = u;
  }
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0 && m) atomicMax(out, m);
}

// A 256 x 256 image of 64-bit counts does not fit shared memory; the lanes of a warp, which
// mostly fall in one cell, add their set elements with one atomic per cell they touch.
__global__ void __launch_bounds__(256)
    cell_kernel(const float* __restrict__ x, const float* __restrict__ q,
                const uint8_t* __restrict__ mask, int64_t n, int64_t cols, int64_t cell_rows,
                int64_t cell_cols, int64_t out_cols, unsigned long long* counts) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned active = __activemask();
    const bool on = mask ? mask[i] != 0 : (isfinite(x[i]) && x[i] != 0 && q[i] == 0);
    const long long k = on ? (i / cols / cell_rows) * out_cols + (i % cols) / cell_cols : -1;
    const unsigned peers = __match_any_sync(active, k);
    if (on && static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1)
      atomicAdd(&counts[k], static_cast<unsigned long long>(__popc(peers)));
  }
}

// One thread per tile: sums in the CPU's element order, so the tile SNRs are the CPU's.
__global__ void __launch_bounds__(128)
    tile_kernel(const float* __restrict__ x, const float* __restrict__ q, const void* scale,
                int scale_size, KernelParams kp, int64_t B, int64_t R, int64_t C, int64_t tr,
                int64_t tc, int64_t gr, int64_t gc, uint32_t* codes_out, float* svals,
                float* amax_out, float* snr_out) {
  const int64_t groups = B * gr * gc, per = gr * gc;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < groups;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = k / per, gi = (k % per) / gc, gj = k % gc;
    const uint32_t code = load_code(scale, scale_size, k, kp.scale);
    const castscope::detail::GroupScale gs = castscope::detail::scale_from_codes(kp, code, 0);
    codes_out[k] = code;
    svals[k] = gs.nan ? __int_as_float(0x7FC00000) : static_cast<float>(gs.s);
    double am = 0, sx2 = 0, se2 = 0;
    const int64_t i1 = (gi + 1) * tr < R ? (gi + 1) * tr : R,
                  j1 = (gj + 1) * tc < C ? (gj + 1) * tc : C;
    for (int64_t i = gi * tr; i < i1; ++i)
      for (int64_t j = gj * tc; j < j1; ++j) {
        const int64_t e = b * R * C + i * C + j;
        const float xv = x[e];
        if (!isfinite(xv)) continue;
        const double xd = xv;
        am = fabs(xd) > am ? fabs(xd) : am;
        const double d = static_cast<double>(q[e]) - xd;
        sx2 = __dadd_rn(sx2, __dmul_rn(xd, xd));  // no FMA: the CPU rounds the product first
        se2 = __dadd_rn(se2, __dmul_rn(d, d));
      }
    amax_out[k] = static_cast<float>(am);
    snr_out[k] = se2 > 0 ? static_cast<float>(10 * log10(sx2 / se2)) : __int_as_float(0x7F800000);
  }
}

Histogram run_hist(const float* v, const float* x, int64_t n, double lo, double hi, int bins,
                   bool log_x) {
  if (bins <= 0 || !(hi > lo)) throw Error("histogram needs bins > 0 and hi > lo");
  DeviceTensor counts = DeviceTensor::empty(DType::U64, {bins + 4}, true);
  const double scale = bins / (hi - lo);
  const bool use_shared = bins <= 12288;
  const size_t smem = use_shared ? static_cast<size_t>(bins) * sizeof(unsigned int) : 0;
  hist_kernel<<<grid_for(n, 256, 1024), 256, smem, stream()>>>(
      v, x, n, lo, hi, scale, bins, log_x, static_cast<unsigned long long*>(counts.mutable_data()),
      use_shared);
  CS_CUDA_LAUNCH("hist_kernel");
  const Tensor h = counts.download();
  return histogram_from_counts(h.ptr<unsigned long long>(), lo, hi, bins, log_x);
}

void need_f32(const DeviceTensor& t, const char* what) {
  if (!t || t.dtype() != DType::F32)
    throw Error(std::string(what) + " needs a float32 device tensor");
}

}  // namespace
}  // namespace detail

Stats compute_stats(const DeviceTensor& original, const DeviceTensor& values, int64_t clipped) {
  using namespace detail;
  if (original.numel() != values.numel())
    throw Error("statistics need tensors of equal size (" + shape_str(original.shape()) + " vs " +
                shape_str(values.shape()) + ")");
  need_f32(values, "statistics of cast values");
  const int64_t n = original.numel();
  DeviceTensor part =
      DeviceTensor::empty(DType::U8, {static_cast<int64_t>(sizeof(Acc)) * kStatBlocks}, true);
  const unsigned grid = grid_for(n, 256, kStatBlocks);
  with_float(original.dtype(), "statistics", [&](auto tag) {
    using T = typename decltype(tag)::type;
    stats_kernel<T><<<grid, 256, 0, stream()>>>(static_cast<const T*>(original.data()),
                                                static_cast<const float*>(values.data()), n,
                                                static_cast<Acc*>(part.mutable_data()));
    CS_CUDA_LAUNCH("stats_kernel");
  });
  std::vector<Acc> h(grid);
  CS_CUDA(
      cudaMemcpyAsync(h.data(), part.data(), sizeof(Acc) * grid, cudaMemcpyDeviceToHost, stream()));
  CS_CUDA(cudaStreamSynchronize(stream()));
  Acc t{};
  for (const Acc& a : h) t.merge(a);
  return castscope::detail::finish_stats(t, clipped);
}

Histogram histogram(const DeviceTensor& v, double lo, double hi, int bins, bool log_x) {
  detail::need_f32(v, "histogram");
  return detail::run_hist(static_cast<const float*>(v.data()), nullptr, v.numel(), lo, hi, bins,
                          log_x);
}

Histogram error_histogram(const DeviceTensor& x, const DeviceTensor& q, double lo, double hi,
                          int bins) {
  detail::need_f32(x, "error histogram");
  detail::need_f32(q, "error histogram");
  if (x.numel() != q.numel()) throw Error("error histogram needs tensors of equal size");
  return detail::run_hist(static_cast<const float*>(q.data()), static_cast<const float*>(x.data()),
                          x.numel(), lo, hi, bins, false);
}

ExponentHistogram exponent_histogram(const DeviceTensor& v) {
  using namespace detail;
  need_f32(v, "exponent histogram");
  DeviceTensor counts = DeviceTensor::empty(DType::U64, {kExpBins + 2}, true);
  exp_hist_kernel<<<grid_for(v.numel(), 256, 1024), 256, 0, stream()>>>(
      static_cast<const float*>(v.data()), v.numel(),
      static_cast<unsigned long long*>(counts.mutable_data()));
  CS_CUDA_LAUNCH("exp_hist_kernel");
  Tensor c = counts.download();
  const unsigned long long* cp = c.ptr<unsigned long long>();
  ExponentHistogram h;
  h.emin = kExpMin;
  h.emax = 127;
  h.counts.assign(cp, cp + kExpBins);
  h.zeros = cp[kExpBins];
  h.nonfinite = cp[kExpBins + 1];
  trim_exponents(h);
  return h;
}

double absmax(const DeviceTensor& v) {
  using namespace detail;
  need_f32(v, "absmax");
  DeviceTensor out = DeviceTensor::empty(DType::U32, {1}, true);
  if (v.numel())
    absmax_kernel<<<grid_for(v.numel(), 256, 1024), 256, 0, stream()>>>(
        static_cast<const float*>(v.data()), v.numel(), static_cast<unsigned*>(out.mutable_data()));
  CS_CUDA_LAUNCH("absmax_kernel");
  unsigned bits = 0;
  CS_CUDA(cudaMemcpyAsync(&bits, out.data(), 4, cudaMemcpyDeviceToHost, stream()));
  CS_CUDA(cudaStreamSynchronize(stream()));
  float a;
  std::memcpy(&a, &bits, 4);
  return a;
}

std::vector<int64_t> cell_counts(const DeviceTensor& x, const DeviceTensor& q,
                                 const DeviceTensor* mask, int64_t cols, int64_t cell_rows,
                                 int64_t cell_cols, int64_t out_rows, int64_t out_cols) {
  using namespace detail;
  need_f32(x, "mask image");
  need_f32(q, "mask image");
  const int64_t n = x.numel();
  if (q.numel() != n || (mask && (!*mask || mask->numel() != n || mask->dtype() != DType::Bool)))
    throw Error("mask image needs the input, its cast values and a Bool mask of equal size");
  if (cols <= 0 || cell_rows <= 0 || cell_cols <= 0 || out_rows <= 0 || out_cols <= 0 || n % cols ||
      (n / cols + cell_rows - 1) / cell_rows > out_rows ||
      (cols + cell_cols - 1) / cell_cols > out_cols)
    throw Error("mask image: cells of " + std::to_string(cell_rows) + " x " +
                std::to_string(cell_cols) + " do not cover the tensor's " + std::to_string(cols) +
                " columns in a " + std::to_string(out_rows) + " x " + std::to_string(out_cols) +
                " image");
  DeviceTensor counts = DeviceTensor::empty(DType::U64, {out_rows * out_cols}, true);
  if (n)
    cell_kernel<<<grid_for(n, 256, 1 << 14), 256, 0, stream()>>>(
        static_cast<const float*>(x.data()), static_cast<const float*>(q.data()),
        mask ? static_cast<const uint8_t*>(mask->data()) : nullptr, n, cols, cell_rows, cell_cols,
        out_cols, static_cast<unsigned long long*>(counts.mutable_data()));
  CS_CUDA_LAUNCH("cell_kernel");
  std::vector<int64_t> h(static_cast<size_t>(out_rows * out_cols));
  CS_CUDA(cudaMemcpyAsync(h.data(), counts.data(), h.size() * 8, cudaMemcpyDeviceToHost, stream()));
  CS_CUDA(cudaStreamSynchronize(stream()));
  return h;
}

DeviceTileMap tile_map_device(const DeviceTensor& x_f32, const DeviceTensor& values,
                              const DeviceCastResult& a) {
  using namespace detail;
  if (a.options.flatten) {
    // The tiles are those of the flattened view (a conv weight's [O, I*kh*kw]).
    DeviceCastResult v = a;
    v.shape = cast_view_shape(a.shape, a.options);
    v.options = view_options(a.options);
    return tile_map_device(x_f32.reshaped(v.shape), values.reshaped(v.shape), v);
  }
  if (a.mode == CastMode::Virtual || !family_traits(a.dtype.family()).grammar ||
      !a.dtype.scaled() || a.dtype.tensor_scaled() || !a.scale)
    throw Error(
        "a tile map needs an actual or compressed cast of a tile- or channel-scaled datatype");
  const castscope::detail::CastPlan p = castscope::detail::make_plan(a.shape, a.dtype, a.options);
  castscope::detail::KernelParams kp = castscope::detail::kernel_params(p);
  if (x_f32.dtype() != DType::F32 || x_f32.numel() != p.numel() || values.numel() != p.numel() ||
      values.dtype() != DType::F32)
    throw Error("tile map needs the float32 input and the cast values of the same tensor");
  if (p.multiscale) {
    if (!a.tenscale) throw Error("tile map of " + a.dtype.str() + " needs its tensor scale");
    Tensor t = a.tenscale.download();
    kp.tensor_scale = scalar::decode_value(
        castscope::detail::load_code(t.data(), p.second_dtype, 0, kp.second), kp.second);
  }
  auto perm_of = [&](const DeviceTensor& t, const Shape& shape) -> DeviceTensor {
    if (!p.permuted) return t;
    Shape s(shape.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = shape[p.perm[i]];
    DeviceTensor o = DeviceTensor::empty(t.dtype(), s);
    permute_device(t.data(), o.mutable_data(), dtype_size(t.dtype()), shape, p.perm, false);
    return o;
  };
  const Shape shape = a.shape.empty() ? Shape{1} : a.shape;
  DeviceTensor x = perm_of(x_f32, shape), q = perm_of(values, shape),
               sc = perm_of(a.scale, a.scale.shape());
  const int64_t g = p.groups();
  DeviceTensor codes = DeviceTensor::empty(DType::U32, {g}),
               sv = DeviceTensor::empty(DType::F32, {g}), am = DeviceTensor::empty(DType::F32, {g}),
               snr = DeviceTensor::empty(DType::F32, {g});
  tile_kernel<<<grid_for(g, 128, 1 << 16), 128, 0, stream()>>>(
      static_cast<const float*>(x.data()), static_cast<const float*>(q.data()), sc.data(),
      static_cast<int>(dtype_size(p.scale_dtype)), kp, p.B, p.R, p.C, p.tr, p.tc, p.gr, p.gc,
      static_cast<uint32_t*>(codes.mutable_data()), static_cast<float*>(sv.mutable_data()),
      static_cast<float*>(am.mutable_data()), static_cast<float*>(snr.mutable_data()));
  CS_CUDA_LAUNCH("tile_kernel");
  DeviceTileMap m;
  m.rows = p.B * p.gr;
  m.cols = p.gc;
  m.tile_rows = p.tr;
  m.tile_cols = p.tc;
  m.scale_code = codes;
  m.scale_value = sv;
  m.absmax = am;
  m.snr_db = snr;
  return m;
}

TileMap tile_map(const DeviceTensor& x_f32, const DeviceTensor& values, const DeviceCastResult& a) {
  return tile_map_device(x_f32, values, a).download();
}

TileMap DeviceTileMap::download() const {
  return window(0, 0, rows, cols);
}

TileMap DeviceTileMap::window(int64_t r0, int64_t c0, int64_t h, int64_t w) const {
  if (r0 < 0 || c0 < 0 || h < 0 || w < 0 || (rows && r0 >= rows) || (cols && c0 >= cols))
    throw Error("tile map window at tile (" + std::to_string(r0) + ", " + std::to_string(c0) +
                ") is outside the " + std::to_string(rows) + " x " + std::to_string(cols) + " map");
  TileMap m;
  m.rows = std::min(h, rows - r0);
  m.cols = std::min(w, cols - c0);
  m.tile_rows = tile_rows;
  m.tile_cols = tile_cols;
  const size_t n = static_cast<size_t>(m.rows * m.cols);
  // Straight into the vectors: no zero-filled staging tensors for what can be a million tiles.
  m.scale_code.resize(n);
  m.scale_value.resize(n);
  m.absmax.resize(n);
  m.snr_db.resize(n);
  // One strided copy per field: rows of the window are cols apart on the device.
  auto get = [&](void* dst, const DeviceTensor& t) {
    if (!n) return;
    CS_CUDA(cudaMemcpy2DAsync(dst, m.cols * 4,
                              static_cast<const char*>(t.data()) + (r0 * cols + c0) * 4, cols * 4,
                              m.cols * 4, m.rows, cudaMemcpyDeviceToHost, detail::stream()));
  };
  get(m.scale_code.data(), scale_code);
  get(m.scale_value.data(), scale_value);
  get(m.absmax.data(), absmax);
  get(m.snr_db.data(), snr_db);
  CS_CUDA(cudaStreamSynchronize(detail::stream()));
  return m;
}

}  // namespace castscope::gpu
