// The CUDA cast backend: plans with the CPU's make_plan, picks a kernel family, and returns the
// CPU engine's layout (input axis order, same dtypes and shapes).
#include <type_traits>

#include "backends/backend.hpp"
#include "castscope/tcfp.hpp"
#include "core/plan.hpp"
#include "backends/cuda/cast_kernels.cuh"
#include "backends/cuda/cuda_internal.hpp"
#include "backends/cuda/mx_kernel.cuh"
#include "backends/cuda/tcfp_kernel.cuh"
#include "backends/cuda/tcfp_lean.cuh"

namespace castscope::tcfp {
// Defined in tcfp.cpp: the block parameters of a TCFP cast (kept in one place).
castscope::detail::tcfp::BlockParams block_params(const DataType& d, const CastOptions& opt,
                                                  int64_t numel);
}  // namespace castscope::tcfp

namespace castscope::gpu {
namespace detail {
namespace {

using castscope::detail::CastPlan;

using castscope::detail::permuted_shape;

// lean_kernel's grid: up to four times the blocks resident at once (cudaOccupancy...), one
// 16-byte chunk per thread for small casts. Measured on the H100 (16384^2, docs/gpu-notes.md v10)
// against the 16 blocks per SM of the other kernels and against exactly the resident blocks: as
// fast as the former from bfloat16 (the latter lost 5 points there) and as fast as the latter
// from float32 (the former lost up to 5 points there).
template <class K>
unsigned lean_grid(K kernel, int64_t chunks) {
  int per_sm = 0;
  CS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0));
  return grid_for(chunks, 256, 4 * static_cast<int64_t>(per_sm < 1 ? 1 : per_sm) * sm_count());
}

}  // namespace

int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      return 132;
    }
    return v;
  }();
  return n;
}

DeviceTensor restore_order(const DeviceTensor& t, const Shape& target, const CastPlan& p) {
  if (!t) return t;
  if (!p.permuted) return t.reshaped(target);
  DeviceTensor out = DeviceTensor::empty(t.dtype(), target.empty() ? Shape{1} : target);
  permute_device(t.data(), out.mutable_data(), dtype_size(t.dtype()), target, p.perm, true);
  return out.reshaped(target);
}

struct CastRunner::Impl {
  DeviceTensor xin, x;  // the input, and the same in the plan's permuted order
  DataType dtype;
  CastOptions opt;
  bool with_values = false;
  bool is_tcfp = false;
  CastPlan p;
  KernelParams kp;
  tcb::BlockParams bp;
  double tile_scale_max = 1.0;
  const char* path = "group";  // the kernel family, for reports ("lean" once run() picks it)
  bool fast_tiles = false;     // 1-D tiles of 8 / 16 / 32 on the last axis: fast or lean kernels
  bool packed = false;
  bool fastq = false;  // round-to-nearest-even, saturating, codes only: the float quantizer applies
  int fid = kRuntime;  // compile-time copy of the data grid, when there is one (kernels take
                       // it only on the fast quantizer's paths, or kBF16 for bfloat16 codes)
  DeviceTensor values, codes, scale, zero, tenscale, meta, mask, residual, rscale, scratch;
  Outs o;
  std::unique_ptr<CodebookRunner> codebook;

  Scratch* sc() { return static_cast<Scratch*>(scratch.mutable_data()); }

  void setup() {
    if (dtype.codebook()) {
      codebook = std::make_unique<CodebookRunner>(xin, dtype, opt, with_values);
      path = codebook->path();
      return;
    }
    // castscope::cast() runs ggml's block formats on the CPU for every device.
    const FamilyTraits& ft = family_traits(dtype.family());
    if (!ft.device_cast)
      throw Error(dtype.str() + " (a " + ft.kind +
                  " format) has no CUDA kernel; it is cast on the CPU");
    is_tcfp = ft.tcfp_bits != 0;
    const bool actual = opt.mode != CastMode::Virtual;
    if (is_tcfp) {
      p = castscope::detail::make_plan(xin.shape(), DataType::parse("e4m3fn_e8m0_t32"), opt);
      bp = castscope::tcfp::block_params(dtype, opt, p.numel());
    } else {
      p = castscope::detail::make_plan(xin.shape(), dtype, opt);
      kp = castscope::detail::kernel_params(p);
      if (p.multiscale) tile_scale_max = p.dtype.scale()->scale.max();
    }
    x = xin;
    if (p.permuted) {
      x = DeviceTensor::empty(xin.dtype(), p.perm_shape);
      permute_device(xin.data(), x.mutable_data(), dtype_size(xin.dtype()), p.in_shape, p.perm,
                     false);
    }
    scratch = DeviceTensor::empty(DType::U8, {static_cast<int64_t>(sizeof(Scratch))});
    if (!actual || with_values) {
      values = DeviceTensor::empty(DType::F32, p.perm_shape);
      o.values = static_cast<float*>(values.mutable_data());
    }
    if (is_tcfp) {
      path = "tcfp";
      if (actual) {
        Shape ss = p.perm_shape;
        ss.back() = p.gc;
        codes = DeviceTensor::empty(DType::F8E4M3, p.perm_shape);
        scale = DeviceTensor::empty(DType::U8, ss);
        o.codes = codes.mutable_data();
        o.scale = scale.mutable_data();
        if (bp.variant != tcb::Variant::T8) {
          residual = DeviceTensor::empty(
              bp.variant == tcb::Variant::T12 ? DType::I8 : DType::F8E4M3, p.perm_shape);
          rscale = DeviceTensor::empty(DType::U8, ss);
          o.residual = residual.mutable_data();
          o.rscale = static_cast<uint8_t*>(rscale.mutable_data());
        }
      }
      return;
    }
    const bool tiles = p.scaled && !p.tensor_scope;
    const bool fast = tiles && !p.permuted && p.R == 1 && p.tr == 1 &&
                      (p.tc == 8 || p.tc == 16 || p.tc == 32) && p.C % p.tc == 0 && p.sub == 0 &&
                      p.sparse_dim < 0 && p.zero_kind == 0 && dtype_size(p.code_dtype) == 1 &&
                      dtype_size(p.scale_dtype) == 1 &&
                      (x.dtype() == DType::F32 || x.dtype() == DType::BF16);
    path = !tiles ? "elementwise" : fast ? "fast" : "group";
    fast_tiles = fast;
    fastq = opt.round == Round::Even && fast_quant_ok(p.data) && !o.values &&
            (p.scaled || opt.overflow == Overflow::Saturate);
    fid = static_format_id(p.data);
    // Sub-byte codes are packed on the device where the kernel writes whole bytes anyway.
    const bool last_even = !p.in_shape.empty() && p.in_shape.back() % 2 == 0;
    packed = opt.mode == CastMode::Compress && p.data.bits <= 4 && p.data.bits > 2 && last_even &&
             (fast || !tiles);
    if (actual) {
      if (packed) {
        Shape cs = p.perm_shape;
        cs.back() /= 2;
        codes = DeviceTensor::empty(DType::U8, cs);
      } else {
        codes = DeviceTensor::empty(p.code_dtype, p.perm_shape);
      }
      o.codes = codes.mutable_data();
      o.code_size = packed ? 1 : static_cast<int>(dtype_size(p.code_dtype));
      o.pack4 = packed;
      if (p.scaled) {
        Shape ss = p.tensor_scope ? Shape{1} : permuted_shape(p.scale_shape, p.perm);
        scale = DeviceTensor::empty(p.scale_dtype, ss);
        o.scale = scale.mutable_data();
        o.scale_size = static_cast<int>(dtype_size(p.scale_dtype));
        if (p.zero_kind) {
          zero = DeviceTensor::empty(p.second_dtype, ss);
          o.zero = zero.mutable_data();
          o.zero_size = static_cast<int>(dtype_size(p.second_dtype));
        }
        if (p.multiscale) tenscale = DeviceTensor::empty(p.second_dtype, {1});
        if (p.sub) {
          meta = DeviceTensor::empty(DType::U8, permuted_shape(p.meta_shape, p.perm), true);
          o.meta = static_cast<uint8_t*>(meta.mutable_data());
        }
      }
      if (p.sparse_dim >= 0) {
        mask = DeviceTensor::empty(DType::Bool, p.perm_shape);
        o.mask = static_cast<uint8_t*>(mask.mutable_data());
      }
    }
  }

  void run() {
    if (codebook) return codebook->run();
    cudaStream_t st = stream();
    init_scratch<<<1, 1, 0, st>>>(sc());
    CS_CUDA_LAUNCH("init_scratch");
    const int64_t n = p.numel();
    const unsigned cap = static_cast<unsigned>(sm_count()) * 16;
    with_float(x.dtype(), "cast input", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* xp = static_cast<const T*>(x.data());
      if (is_tcfp) {
        const int64_t groups = p.groups();
        // Double input: half the warps per block, so that the tiles fit static shared memory.
        const int threads = std::is_same<T, double>::value ? kTcfpThreads / 2 : kTcfpThreads;
        const unsigned grid = grid_for((groups + 31) / 32 * 32, threads, cap);
        bool fast = false;
        if constexpr (!std::is_same<T, double>::value)
          fast = bp.round == Round::Even && !o.values && static_format_id(bp.fp8) == kE4M3FN &&
                 (bp.variant == tcb::Variant::T8 || fast_quant_ok(bp.residual));
        if constexpr (std::is_same<T, float>::value || std::is_same<T, __nv_bfloat16>::value) {
          // Whole blocks along the last axis: the lean kernel (chunks of 16 bytes per lane).
          if (fast && p.C % tcb::kBlock == 0 && o.codes && o.scale &&
              (bp.variant != tcb::Variant::T12 || int_fixed_grid(bp.residual))) {
            auto lean = [&](auto kernel) {
              path = "tcfp-lean";
              constexpr int64_t L = tcb::kBlock / Raw<T>::V;
              kernel<<<lean_grid(kernel, groups * L), 256, 0, st>>>(xp, groups, bp, sc(), o);
            };
            if (bp.variant == tcb::Variant::T12)
              lean(tcfp_lean_kernel<T, 1, false>);
            else if (bp.variant == tcb::Variant::T16)
              lean(tcfp_lean_kernel<T, 2, false>);
            else if (bp.nf_aware)
              lean(tcfp_lean_kernel<T, 0, true>);
            else
              lean(tcfp_lean_kernel<T, 0, false>);
            CS_CUDA_LAUNCH("tcfp_lean_kernel");
            return;
          }
        }
        if (fast) {
          path = "tcfp-fast";
          if constexpr (!std::is_same<T, double>::value)
            tcfp_warp_kernel<T, true><<<grid, threads, 0, st>>>(xp, p.C, p.gc, groups, bp, sc(), o);
        } else {
          tcfp_warp_kernel<T, false><<<grid, threads, 0, st>>>(xp, p.C, p.gc, groups, bp, sc(), o);
        }
        CS_CUDA_LAUNCH("tcfp_warp_kernel");
        return;
      }
      if (p.multiscale || (p.scaled && p.tensor_scope)) {
        constexpr bool vec = std::is_same<T, float>::value || std::is_same<T, __nv_bfloat16>::value;
        if constexpr (vec) {
          constexpr int V = Vec<T>::V;
          if (n % V == 0)
            reduce_vec_kernel<T><<<grid_for(n / V, 256, cap), 256, 0, st>>>(xp, n / V, sc());
          else
            reduce_kernel<T><<<grid_for(n, 256, cap), 256, 0, st>>>(xp, n, sc());
        } else {
          reduce_kernel<T><<<grid_for(n, 256, cap), 256, 0, st>>>(xp, n, sc());
        }
        CS_CUDA_LAUNCH("reduce_kernel");
        finalize_kernel<<<1, 1, 0, st>>>(kp, tile_scale_max, p.multiscale,
                                         p.scaled && p.tensor_scope, sc(), o,
                                         tenscale ? tenscale.mutable_data() : nullptr,
                                         static_cast<int>(dtype_size(p.second_dtype)));
        CS_CUDA_LAUNCH("finalize_kernel");
      }
      if (!p.scaled || p.tensor_scope) {
        if constexpr (std::is_same<T, float>::value || std::is_same<T, __nv_bfloat16>::value) {
          constexpr int V = Vec<T>::V;
          const bool bytes = o.pack4 || ((o.code_size == 1 || o.code_size == 2) &&
                                         kp.data.kind != scalar::Kind::Int);
          // bfloat16's grid is outside fast_quant_ok but has its own exact code function, for
          // either overflow policy.
          const bool bf16 =
              opt.round == Round::Even && !o.values && o.code_size == 2 && fid == kBF16;
          if ((fastq || bf16) && !p.scaled && n % V == 0 && o.codes && bytes) {
            auto lean = [&](auto kernel) {
              path = "lean";
              kernel<<<lean_grid(kernel, n / V), 256, 0, st>>>(xp, n / V, kp, sc(), o);
            };
            if (bf16)
              lean(lean_kernel<T, V, kBF16, kUnscaled>);
            else if (fid == kE4M3FN)
              lean(lean_kernel<T, V, kE4M3FN, kUnscaled>);
            else if (fid == kE5M2)
              lean(lean_kernel<T, V, kE5M2, kUnscaled>);
            else
              unscaled_vec_kernel<T>
                  <<<grid_for(n / V, 256, cap), 256, 0, st>>>(xp, n / V, kp, sc(), o);
            CS_CUDA_LAUNCH("unscaled_vec_kernel");
            return;
          }
        }
        const unsigned grid = grid_for((n + 7) / 8, 256, cap);
        if (fastq && fid == kE4M3FN && !p.scaled)
          elementwise_kernel<T, kE4M3FN><<<grid, 256, 0, st>>>(xp, n, kp, sc(), o, true);
        else
          elementwise_kernel<T, kRuntime><<<grid, 256, 0, st>>>(xp, n, kp, sc(), o, fastq);
        CS_CUDA_LAUNCH("elementwise_kernel");
        return;
      }
      if (fast_tiles) {
        if constexpr (std::is_same<T, float>::value || std::is_same<T, __nv_bfloat16>::value) {
          constexpr int V = Vec<T>::V;
          const int64_t ntiles = p.groups();
          const int64_t chunks = n / V;
          const unsigned grid = grid_for(chunks, 256, cap);
          int mode = !fastq ? 0 : (kp.scale_is_exponent && !kp.multiscale ? 1 : 2);
          const bool fast_scale = mode == 2 && !kp.scale_is_exponent && fast_quant_ok(kp.scale);
          // NVFP4's layout: e2m1 data, e4m3 tile scales, a float32 tensor scale.
          const scalar::Format& ts = kp.second;
          if (mode == 2 && fast_scale && fid == kE2M1FNUZ && kp.multiscale &&
              static_format_id(kp.scale) == kE4M3FN && ts.kind == scalar::Kind::Float &&
              ts.ebits == 8 && ts.mbits == 23)
            mode = 3;
          // MX tiles with a code function: the lean kernel (scale codes of one byte, a bias
          // that keeps 2^-shift a float).
          const bool byte_codes = o.codes && o.scale && o.code_size == 1;
          const bool lean = mode == 1 && has_code_static(fid) && byte_codes && kp.scale.bias >= 0 &&
                            kp.scale.bias <= 127;
          const bool lean_nv = mode == 3 && byte_codes;
          if (lean || lean_nv) path = "lean";
          auto go = [&](auto tile) {
            constexpr int TL = decltype(tile)::value;
            // lean_kernel's grid counts lanes, each taking per_lane of the 16-byte chunks.
            auto tiles = [&](auto kernel, int per_lane) {
              kernel<<<lean_grid(kernel, chunks / per_lane), 256, 0, st>>>(xp, ntiles, kp, sc(), o);
            };
            constexpr int mx = lean_chunks_per_lane<T, TL, kExponent>();
            if (mode == 0)
              fast_kernel<T, TL, 0, kRuntime>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale);
            else if (lean && fid == kE4M3FN)
              tiles(lean_kernel<T, TL, kE4M3FN, kExponent>, mx);
            else if (lean && fid == kE2M3FNUZ)
              tiles(lean_kernel<T, TL, kE2M3FNUZ, kExponent>, mx);
            else if (lean && fid == kE3M2FNUZ)
              tiles(lean_kernel<T, TL, kE3M2FNUZ, kExponent>, mx);
            else if (lean && fid == kE5M2)
              tiles(lean_kernel<T, TL, kE5M2, kExponent>, mx);
            else if (lean && fid == kE2M1FNUZ)
              tiles(lean_kernel<T, TL, kE2M1FNUZ, kExponent>, mx);
            else if (lean && fid == kInt8Fixed)
              tiles(lean_kernel<T, TL, kInt8Fixed, kExponent>, mx);
            else if (mode == 1)
              fast_kernel<T, TL, 1, kRuntime>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale);
            else if (lean_nv) {
              // lean_kernel takes the tensor scales NVFP4's float path fits, on the device (no
              // host synchronisation), and fast_kernel the others.
              tiles(lean_kernel<T, TL, kE2M1FNUZ, kNvfp4>, lean_chunks_per_lane<T, TL, kNvfp4>());
              fast_kernel<T, TL, 3, kE2M1FNUZ>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale, true);
            } else if (mode == 3)
              fast_kernel<T, TL, 3, kE2M1FNUZ>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale);
            else if (fid == kE2M1FNUZ)
              fast_kernel<T, TL, 2, kE2M1FNUZ>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale);
            else
              fast_kernel<T, TL, 2, kRuntime>
                  <<<grid, 256, 0, st>>>(xp, ntiles, kp, sc(), o, fast_scale);
          };
          if (p.tc == 32)
            go(std::integral_constant<int, 32>{});
          else if (p.tc == 16)
            go(std::integral_constant<int, 16>{});
          else
            go(std::integral_constant<int, 8>{});
          CS_CUDA_LAUNCH("fast_kernel");
          return;
        }
      }
      Geo g{p.B, p.R, p.C, p.tr, p.tc, p.gr, p.gc, p.sub, p.sparse_dim, p.sp_n, p.sp_m};
      group_kernel<T><<<grid_for(p.groups() * 32, 256, cap), 256, 0, st>>>(xp, kp, g, sc(), o);
      CS_CUDA_LAUNCH("group_kernel");
    });
  }

  DeviceTensor restore(const DeviceTensor& t, const Shape& target) {
    return restore_order(t, target, p);
  }

  DeviceCastResult result() {
    if (codebook) return codebook->result();
    Scratch s;
    CS_CUDA(cudaMemcpyAsync(&s, scratch.data(), sizeof(Scratch), cudaMemcpyDeviceToHost, stream()));
    CS_CUDA(cudaStreamSynchronize(stream()));
    DeviceCastResult r;
    r.dtype = dtype;
    r.options = opt;
    r.shape = xin.shape();
    r.counts.clipped = static_cast<int64_t>(s.counts[0]);
    r.counts.nonfinite = static_cast<int64_t>(s.counts[1]);
    r.counts.pruned = static_cast<int64_t>(s.counts[2]);
    const Shape& xs = xin.shape();
    r.values = restore(values, xs);
    if (opt.mode == CastMode::Virtual) {
      r.mode = CastMode::Virtual;
      return r;
    }
    r.mode = packed ? CastMode::Compress : CastMode::Actual;
    if (packed) {
      Shape cs = xs.empty() ? Shape{1} : xs;
      cs.back() /= 2;
      r.codes = codes.reshaped(cs);
    } else {
      r.codes = restore(codes, xs);
    }
    if (is_tcfp) {
      r.scale = restore(scale, p.scale_shape);
      r.residual = restore(residual, xs);
      r.residual_scale = restore(rscale, p.scale_shape);
      return r;
    }
    r.mask = restore(mask, xs);
    if (scale) r.scale = p.tensor_scope ? scale : restore(scale, p.scale_shape);
    if (zero) r.zero = p.tensor_scope ? zero : restore(zero, p.scale_shape);
    r.tenscale = tenscale;
    r.meta = restore(meta, p.meta_shape);
    return r;
  }

  double min_bytes() const {
    if (codebook) return codebook->min_bytes();
    double b = static_cast<double>(x.nbytes());
    for (const DeviceTensor* t : {&values, &codes, &scale, &zero, &meta, &mask, &residual, &rscale})
      if (*t) b += static_cast<double>(t->nbytes());
    return b;
  }
};

CastRunner::CastRunner(const DeviceTensor& x, const DataType& dtype, const CastOptions& opt,
                       bool with_values)
    : impl_(new Impl) {
  if (!x) throw Error("cannot cast an undefined device tensor");
  if (x.numel() == 0)
    throw Error("cannot cast an empty tensor (shape " + shape_str(x.shape()) + ")");
  with_float(x.dtype(), "cast input", [](auto) {});
  impl_->xin = x;
  impl_->dtype = dtype;
  impl_->opt = opt;
  impl_->with_values = with_values;
  impl_->setup();
}
CastRunner::~CastRunner() = default;
void CastRunner::run() {
  impl_->run();
}
DeviceCastResult CastRunner::result() {
  return impl_->result();
}
const char* CastRunner::path() const {
  return impl_->path;
}
double CastRunner::min_bytes() const {
  return impl_->min_bytes();
}

}  // namespace detail

DeviceCastResult cast(const DeviceTensor& x, const DataType& dtype, const CastOptions& options,
                      bool with_values) {
  if (options.job) options.job->check();
  const CastOptions opt = resolve_axis(options, x.shape());
  if (opt.flatten) {
    // As castscope::cast: the flattened view is cast, the values come back in the input's shape.
    DeviceCastResult r =
        cast(x.reshaped(cast_view_shape(x.shape(), opt)), dtype, view_options(opt), with_values);
    r.options.axis = opt.axis;
    r.options.flatten = true;
    r.options.lead = opt.lead;
    r.shape = x.shape();
    if (r.values) r.values = r.values.reshaped(x.shape());
    return r;
  }
  // Rotations wrap the cast in castscope::cast (rotation/rotation.cpp); silently casting the
  // unrotated tensor here would give different numbers than the host API.
  if (opt.rotate.enabled())
    throw Error("device-resident cast: rotation " + opt.rotate.str() +
                " is applied by castscope::cast, not here");
  detail::CastRunner runner(x, dtype, opt, with_values);
  runner.run();
  DeviceCastResult r = runner.result();
  if (opt.job) opt.job->report(1.0);
  return r;
}

}  // namespace castscope::gpu

namespace castscope::cuda {

CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& opt) {
  Tensor in = x;
  if (x.dtype() == DType::F8E4M3 || x.dtype() == DType::F8E5M2) in = x.to_f32();
  gpu::DeviceTensor dx = gpu::DeviceTensor::upload(in);
  return gpu::cast(dx, dtype, opt).download();
}

}  // namespace castscope::cuda

namespace castscope::gpu::detail {

std::string cast_kernel(const Tensor& x, const DataType& d, const CastOptions& o) {
  CastRunner runner(DeviceTensor::upload(x), d, o, false);
  runner.run();
  return runner.path();
}

bool fast_quantizer_applies(const scalar::Format& f) {
  return fast_quant_ok(f);
}

int static_grid(const scalar::Format& f) {
  return static_format_id(f);
}

}  // namespace castscope::gpu::detail
