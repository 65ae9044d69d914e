// Codebook casts of device tensors, bit for bit the CPU engine's (codebook/cb_block.hpp).
//
// The interval kernel stages a block's tiles in shared memory, finds each element's interval in
// the tables of codebook/cb_lut.hpp once, and keeps one squared-error sum per mapping in
// registers: per element and mapping only d = mag - a and sse += d * d remain, the operations
// encode_sub performs, in its order and without fused multiply-adds. Tiles that the tables do not
// cover (a NaN or zero scale) and layouts outside its limits run encode_tile itself.
#include <algorithm>
#include <type_traits>

#include "families/codebook/cb_cast.hpp"
#include "families/codebook/cb_lut.hpp"
#include "backends/cuda/cuda_common.hpp"
#include "backends/cuda/cuda_internal.hpp"
#include "backends/cuda/codebook_lut_kernel.cuh"
#include "backends/cuda/fast_quant.cuh"

namespace castscope::gpu::detail {
namespace {

namespace cb = castscope::detail::cb;
using namespace codebook_kernel;

// Typed input read as doubles: the accessor encode_tile takes.
template <class T>
struct DevView {
  const T* p;
  __device__ double operator[](int i) const { return Load<T>::get(p, i); }
  __device__ DevView operator+(int k) const { return {p + k}; }
};

template <class T>
__global__ void codebook_tile_kernel(const T* __restrict__ x, CbGeo g, cb::Params p, CbOuts o) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long clipped = 0, nonfinite = 0;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < g.groups;
       t += stride) {
    const int64_t row = t / g.gc, c0 = (t % g.gc) * p.tile;
    const int n = g.C - c0 < p.tile ? static_cast<int>(g.C - c0) : p.tile;
    const int64_t first = row * g.C + c0;
    const cb::TileResult r = cb::encode_tile(p, DevView<T>{x + first}, n, g.subs_per_row, row, c0,
                                             o.codes ? o.codes + first : nullptr,
                                             o.values ? o.values + first : nullptr, o.meta);
    if (o.scale) store_code(o.scale, o.scale_size, t, r.scale_code, p.kp.scale);
    clipped += r.clipped;
    nonfinite += r.nonfinite;
  }
  if (clipped) atomicAdd(o.counts, clipped);
  if (nonfinite) atomicAdd(o.counts + 1, nonfinite);
}

// Whether the scaled kernel (codebook_lut_kernel's SCALED) takes this cast: sums in the scale's
// units need |shift| < 256; float scales also need the fast scale choice (fast_quant_ok), a
// significand short enough that a magnitude times it is exact in float, every scale and bucket end
// within float's normal range (the float keys' products), and the bucket alone giving the interval
// (docs/gpu-notes.md, exactness).
bool sums_in_scale_units(const castscope::detail::KernelParams& kp, const cb::LutIndex& ix) {
  const scalar::Format& sf = kp.scale;
  if (kp.scale_is_exponent)
    return sf.bits <= 16 && sf.bias <= 255 && (1 << sf.bits) - 1 - sf.bias <= 255;
  return sf.kind == scalar::Kind::Float && kp.zero_kind == 0 && !kp.multiscale &&
         fast_quant_ok(sf) && sf.mbits <= 18 && sf.qmin >= -60 && sf.maxbinade <= 60 &&
         ix.max_steps == 0 && ix.emin >= -60 && ix.emin + ix.octaves <= 60;
}

template <class B>
void copy_table(DeviceTensor& dst, DType dt, const std::vector<B>& src) {
  dst = DeviceTensor::empty(dt, {static_cast<int64_t>(std::max<size_t>(src.size(), 1))});
  if (!src.empty())
    CS_CUDA(cudaMemcpyAsync(dst.mutable_data(), src.data(), src.size() * sizeof(B),
                            cudaMemcpyHostToDevice, stream()));
}

}  // namespace

struct CodebookRunner::Impl {
  DeviceTensor xin, x;
  DataType dtype;
  CastOptions opt;
  codebook::Layout layout;
  cb::Lut lut;
  bool use_lut = false;
  bool float_sums = true;  // every magnitude 0 or in [2^-100, 2^30]: float_rows is exact
  int tile_shift = 0;
  DeviceTensor mags, thr, bucket, slot, hi, same, counts;
  DeviceTensor values, codes, scale, meta;

  LutDev lut_dev() const {
    LutDev d;
    d.thr = static_cast<const double*>(thr.data());
    d.bucket = static_cast<const uint8_t*>(bucket.data());
    d.slot = static_cast<const uint8_t*>(slot.data());
    d.hi = static_cast<const uint4*>(hi.data());
    d.same = static_cast<const uint16_t*>(same.data());
    d.ix = lut.ix;
    d.row_groups = lut.row_groups;
    return d;
  }
  int threads() const { return std::clamp(4096 / layout.tile, 32, 128); }
  // The shared memory layout, passed to the kernel (offsets in its parameters, not recomputed
  // where registers are short). float_rows: the scaled kernel's, never larger.
  Smem smem_layout(bool float_rows = false, bool code_table = false) const {
    const int in_size = xin.dtype() == DType::F64 ? 8 : 4;
    return Smem(lut_dev(), lut.width, layout.tile, layout.tile / layout.sub, threads(), in_size,
                static_cast<bool>(values), float_rows, code_table);
  }
  // The scaled kernel's code table (kCodeTableBytes) needs seven-bit interval indices, subtiles of
  // whole code words, and room.
  bool code_table(bool units) const {
    return units && codes && lut.ix.nthr < 128 && layout.sub >= 4 &&
           smem_layout(true, true).total <= smem_optin;
  }
  int smem_optin = 0;
  int smem_bytes() const { return smem_layout().total; }
};

CodebookRunner::CodebookRunner(const DeviceTensor& xin, const DataType& dtype,
                               const CastOptions& opt, bool with_values)
    : impl_(new Impl) {
  Impl& s = *impl_;
  s.xin = xin;
  s.dtype = dtype;
  s.opt = opt;
  s.layout = codebook::make_layout(xin.shape(), dtype, opt);
  const castscope::detail::CastPlan& p = s.layout.plan;
  s.x = xin;
  if (p.permuted) {
    s.x = DeviceTensor::empty(xin.dtype(), p.perm_shape);
    permute_device(xin.data(), s.x.mutable_data(), dtype_size(xin.dtype()), p.in_shape, p.perm,
                   false);
  }
  const bool actual = opt.mode != CastMode::Virtual;
  if (!actual || with_values) s.values = DeviceTensor::empty(DType::F32, p.perm_shape);
  if (actual) {
    s.codes = DeviceTensor::empty(DType::U8, p.perm_shape);
    s.scale = DeviceTensor::empty(p.scale_dtype, {p.B * p.R * p.gc});
    s.meta = DeviceTensor::empty(DType::U8, s.layout.meta_perm_shape, true);
  }
  s.counts = DeviceTensor::empty(DType::U64, {2}, true);
  copy_table(s.mags, DType::F64, s.layout.mags);
  s.lut = cb::build_lut(s.layout.params());
  for (double m : s.layout.mags)
    s.float_sums = s.float_sums && (m == 0 || (m >= 0x1p-100 && m <= 0x1p30));
  const int tile = s.layout.tile;
  const bool pow2_tile = tile >= 4 && tile <= 128 && (tile & (tile - 1)) == 0;
  // The tables' double sums fuse a magnitude's product with the scale, exact for scales of at
  // most 48 bits (codebook_lut_kernel); wider ones take encode_sub itself.
  if (s.lut.ok && pow2_tile && p.C % tile == 0 && p.scale.bits <= 48) {
    while ((1 << s.tile_shift) < tile) ++s.tile_shift;
    copy_table(s.thr, DType::F64, s.lut.thr);
    copy_table(s.bucket, DType::U8, s.lut.bucket);
    copy_table(s.slot, DType::U8, s.lut.slot);
    copy_table(s.hi, DType::U16, s.lut.hi16);
    copy_table(s.same, DType::U16, s.lut.same);
    int dev = 0, optin = 0;
    CS_CUDA(cudaGetDevice(&dev));
    CS_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    s.smem_optin = optin;
    s.use_lut = s.smem_bytes() <= optin;
  }
}

CodebookRunner::~CodebookRunner() = default;

void CodebookRunner::run() {
  Impl& s = *impl_;
  const castscope::detail::CastPlan& p = s.layout.plan;
  cudaStream_t st = stream();
  CS_CUDA(cudaMemsetAsync(s.counts.mutable_data(), 0, 2 * sizeof(unsigned long long), st));
  CbGeo g{p.C, p.gc, p.B * p.R * p.gc, s.layout.subs_per_row};
  CbOuts o;
  o.codes = s.codes ? static_cast<uint8_t*>(s.codes.mutable_data()) : nullptr;
  o.values = s.values ? static_cast<float*>(s.values.mutable_data()) : nullptr;
  o.meta = s.meta ? static_cast<uint8_t*>(s.meta.mutable_data()) : nullptr;
  o.scale = s.scale ? s.scale.mutable_data() : nullptr;
  o.scale_size = static_cast<int>(dtype_size(p.scale_dtype));
  o.counts = static_cast<unsigned long long*>(s.counts.mutable_data());
  cb::Params cp = s.layout.base;
  cp.mags = static_cast<const double*>(s.mags.data());
  with_float(s.x.dtype(), "cast input", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(s.x.data());
    if (!s.use_lut) {
      codebook_tile_kernel<T><<<grid_for(g.groups, 128, 65535), 128, 0, st>>>(xp, g, cp, o);
      CS_CUDA_LAUNCH("codebook_tile_kernel");
      return;
    }
    const LutDev l = s.lut_dev();
    const bool units =
        !std::is_same<T, double>::value && s.float_sums && sums_in_scale_units(cp.kp, l.ix);
    const Smem layout = s.smem_layout(units, s.code_table(units));
    const int threads = s.threads(), smem = layout.total;
    auto launch = [&](auto kernel) {
      CS_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int per_sm = 0;
      CS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
      const int64_t chunks = (g.groups + threads - 1) / threads;
      const unsigned grid = grid_for(chunks, 1, std::max(per_sm, 1) * int64_t{sm_count()});
      kernel<<<grid, threads, smem, st>>>(xp, g, cp, l, o, s.tile_shift, layout);
    };
    auto go = [&](auto width) {
      constexpr int W = decltype(width)::value;
      if constexpr (std::is_same<T, double>::value)
        launch(codebook_lut_kernel<T, W, false>);
      else if (units)
        launch(codebook_lut_kernel<T, W, true>);
      else
        launch(codebook_lut_kernel<T, W, false>);
    };
    switch (s.lut.width) {
      case 2:
        go(std::integral_constant<int, 2>{});
        break;
      case 4:
        go(std::integral_constant<int, 4>{});
        break;
      case 8:
        go(std::integral_constant<int, 8>{});
        break;
      default:
        go(std::integral_constant<int, 16>{});
    }
    CS_CUDA_LAUNCH("codebook_lut_kernel");
  });
}

DeviceCastResult CodebookRunner::result() {
  Impl& s = *impl_;
  const castscope::detail::CastPlan& p = s.layout.plan;
  unsigned long long c[2];
  CS_CUDA(cudaMemcpyAsync(c, s.counts.data(), sizeof(c), cudaMemcpyDeviceToHost, stream()));
  CS_CUDA(cudaStreamSynchronize(stream()));
  DeviceCastResult r;
  r.dtype = s.dtype;
  r.options = s.opt;
  r.shape = s.xin.shape();
  r.counts.clipped = static_cast<int64_t>(c[0]);
  r.counts.nonfinite = static_cast<int64_t>(c[1]);
  r.values = restore_order(s.values, r.shape, p);
  r.mode = s.opt.mode == CastMode::Virtual ? CastMode::Virtual : CastMode::Actual;
  if (r.mode == CastMode::Virtual) return r;
  r.codes = restore_order(s.codes, r.shape, p);
  r.scale = restore_order(s.scale, p.scale_shape, p);
  r.meta = restore_order(s.meta, s.layout.meta_shape, p);
  return r;
}

const char* CodebookRunner::path() const {
  return impl_->use_lut ? "codebook" : "codebook-tile";
}

// Codes and mapping choices counted at their packed widths: the least a compressed result holds,
// though the kernel writes them a byte each (download() packs them).
double CodebookRunner::min_bytes() const {
  const Impl& s = *impl_;
  const Codebook& cb = *s.dtype.codebook();
  double b = static_cast<double>(s.x.nbytes());
  if (s.values) b += static_cast<double>(s.values.nbytes());
  if (s.scale) b += static_cast<double>(s.scale.nbytes());
  if (s.codes)
    b += static_cast<double>(s.codes.numel()) * codebook::packed_width(cb.index_bits) / 8;
  if (s.meta) b += static_cast<double>(s.meta.numel()) * codebook::packed_width(cb.meta_bits) / 8;
  return b;
}

}  // namespace castscope::gpu::detail
