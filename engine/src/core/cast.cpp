// Dispatch (CPU / CUDA, standard / TCFP), the option vocabulary, and the packed layout.
#include <cstdio>
#include <cstring>
#include <mutex>

#include "backends/backend.hpp"
#include "castscope/cast.hpp"
#include "backends/cpu/cast_cpu.hpp"
#include "castscope/executor.hpp"
#include "families/family_table.hpp"
#include "core/parallel.hpp"
#include "core/plan.hpp"
#include "rotation/rotation_backend.hpp"

namespace castscope {

void JobControl::report(double fraction) {
  progress.store(fraction);
  if (on_progress) on_progress(fraction);
}

void JobControl::check() const {
  if (cancel.load(std::memory_order_relaxed)) throw Cancelled();
}

std::function<void(const std::string&)>& notice_handler() {
  static std::function<void(const std::string&)> h = [](const std::string& m) {
    std::fprintf(stderr, "castscope: %s\n", m.c_str());
  };
  return h;
}

namespace {

CastResult cast_cpu(const Tensor& x, const DataType& d, const CastOptions& o) {
  CastOptions actual_opt = o;
  if (o.mode == CastMode::Compress) actual_opt.mode = CastMode::Actual;
  CastResult r = detail::family_ops(d.family()).cast(x, d, actual_opt);
  r.backend = "cpu";
  if (o.mode == CastMode::Compress) {
    r = pack(r);
    r.options.mode = CastMode::Compress;
  }
  r.options.device = o.device;
  return r;
}

}  // namespace

void set_notice_handler(std::function<void(const std::string&)> handler) {
  notice_handler() = std::move(handler);
}

BackendInfo backend_info() {
  BackendInfo b;
#ifdef CASTSCOPE_HAVE_CUDA
  b.cuda_built = true;
#endif
  b.cuda_available = cuda::available(&b.reason, &b.device_name);
  return b;
}

namespace {

// A result computed on the flattened view, restated for the input of shape `shape` cast with
// the resolved options `o`: the codes and scaling tensors stay in the view's shapes.
CastResult from_view(CastResult r, const CastOptions& o, const Shape& shape) {
  r.options.axis = o.axis;
  r.options.flatten = o.flatten;
  r.options.lead = o.lead;
  r.options.axis_auto = false;
  r.shape = shape;
  if (r.values) r.values = r.values.reshaped(shape);
  return r;
}

}  // namespace

CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& options) {
  if (x.numel() == 0)
    throw Error("cannot cast an empty tensor (shape " + shape_str(x.shape()) + ")");
  if (options.axis_auto || options.flatten) {
    const CastOptions o = resolve_axis(options, x.shape());
    if (!o.flatten) return cast(x, dtype, o);
    // Flattening comes before the rotation: a rotation runs along the flattened axis too.
    return from_view(cast(x.reshaped(cast_view_shape(x.shape(), o)), dtype, view_options(o)), o,
                     x.shape());
  }
  if (options.rotate.enabled()) return rotation::cast_rotated(x, dtype, options);
  if (options.mode == CastMode::Virtual)
    if (const auto own = detail::family_ops(dtype.family()).virtual_cast)
      if (std::optional<CastResult> r = own(x, dtype, options)) return *std::move(r);
  // The executor places the cast: the CPU for a family without device kernels (ggml's block
  // formats), for small work under Auto (the GPU's start-up cost) and without a usable GPU; a
  // GPU failure falls back to the CPU, which gives the same bits (or rejects a bad request with
  // the same message).
  exec::Executor& ex = exec::current();
  const exec::Placement where =
      ex.place(exec::Work::Cast, options.device, x.numel(), &dtype, exec::OnFailure::FallBack);
  return ex.run<CastResult>(
      where, exec::OnFailure::FallBack, [&] { return ex.backend().cast(x, dtype, options); },
      [&] { return cast_cpu(x, dtype, options); });
}

Tensor upcast(const CastResult& result) {
  if (result.options.flatten) return upcast(as_view(result)).reshaped(result.shape);
  if (result.options.rotate.enabled() && result.mode != CastMode::Virtual)
    return rotation::upcast_rotated(result);
  if (result.mode == CastMode::Virtual) {
    if (!result.values) throw Error("virtual cast result has no values");
    return result.values;
  }
  CastResult a = result.mode == CastMode::Compress ? unpack(result) : result;
  return detail::family_ops(a.dtype.family()).upcast(a);
}

// ---------------------------------------------------------------------------------------------
// Packed layout (docs/formats.md): sparse values removed along the sparse axis, sub-byte codes
// packed along the last axis little-end first, masks 8 per byte, K-bit subtile offsets 8/K per
// byte.

namespace {

struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisView view_axis(const Shape& s, int axis) {
  AxisView v;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < axis)
      v.outer *= s[i];
    else if (i == axis)
      v.len = s[i];
    else
      v.inner *= s[i];
  }
  return v;
}

int code_width(int bits) {
  return bits <= 2 ? 2 : bits <= 4 ? 4 : 8;
}

// Output bytes [b, e) of a flat packing of `width`-bit elements, 8 / width per byte. A width
// fixed at compile time (Width > 0) fixes the count, which the compiler unrolls and vectorizes
// (a run-time count packs a byte at a time); Width 0 takes `run_width`.
template <int Width>
void pack_flat(const uint8_t* in, uint8_t* dst, int64_t b, int64_t e, int run_width = Width) {
  const int width = Width > 0 ? Width : run_width;
  const int per = 8 / width;
  const uint8_t mask = static_cast<uint8_t>((1u << width) - 1);
  for (int64_t j = b; j < e; ++j) {
    const uint8_t* src = in + j * per;
    uint8_t v = 0;
    for (int k = 0; k < per; ++k) v |= static_cast<uint8_t>((src[k] & mask) << (k * width));
    dst[j] = v;
  }
}

// Pack the low `width` bits of each byte-sized element along the last axis.
Tensor pack_bits(const Tensor& t, int width, int threads) {
  const Shape& s = t.shape();
  const int64_t last = s.empty() ? 1 : s.back();
  const int64_t rows = t.numel() / last;
  const int per = 8 / width;
  Shape o = s.empty() ? Shape{1} : s;
  o.back() = (last + per - 1) / per;
  Tensor out = Tensor::empty(DType::U8, o);
  const uint8_t* in = t.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  const uint8_t mask = static_cast<uint8_t>((1u << width) - 1);
  if (last % per == 0) {
    // No row ends inside a byte: the packing is one flat pass, split over threads. It ran on one
    // thread, a byte at a time, at a third of the cast's speed.
    detail::parallel_for(out.numel(), int64_t{1} << 18, threads, nullptr,
                         [&](int64_t b, int64_t e) {
                           if (width == 4)
                             pack_flat<4>(in, dst, b, e);
                           else if (width == 2)
                             pack_flat<2>(in, dst, b, e);
                           else if (width == 1)
                             pack_flat<1>(in, dst, b, e);
                           else
                             pack_flat<0>(in, dst, b, e, width);
                         });
    return out;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < last; ++k)
      dst[r * o.back() + k / per] |=
          static_cast<uint8_t>((in[r * last + k] & mask) << ((k % per) * width));
  return out;
}

Tensor unpack_bits(const Tensor& t, int width, const Shape& shape, DType dtype, int value_bits,
                   bool sign_extend, const char* what) {
  if (!t) throw Error(std::string("compressed result has no ") + what + " tensor");
  if (t.dtype() != DType::U8 && t.dtype() != DType::Bool && t.dtype() != DType::I8)
    throw Error(std::string("compressed ") + what + " tensor must hold bytes, not " +
                dtype_name(t.dtype()));
  Tensor out = Tensor::empty(dtype, shape);
  const int64_t last = shape.empty() ? 1 : shape.back();
  const int64_t rows = out.numel() / last;
  const int per = 8 / width;
  const int64_t plast = (last + per - 1) / per;
  if (t.numel() != rows * plast)
    throw Error(std::string("compressed ") + what + " tensor has " + std::to_string(t.numel()) +
                " bytes, expected " + std::to_string(rows * plast));
  const uint8_t* in = t.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < last; ++k) {
      uint8_t v = static_cast<uint8_t>((in[r * plast + k / per] >> ((k % per) * width)) &
                                       ((1u << width) - 1));
      if (sign_extend && ((v >> (value_bits - 1)) & 1))
        v |= static_cast<uint8_t>(0xFF << value_bits);
      dst[r * last + k] = v;
    }
  return out;
}

// Shared-microexponent integers (MX9 / MX6 / MX4) are stored as sign-magnitude elements, as in
// the format's definition; everywhere else signed codes are two's complement.
bool sign_magnitude(const detail::CastPlan& p) {
  return p.sub && p.data.kind == scalar::Kind::Int;
}

Tensor convert_sign(const Tensor& t, int bits, bool to_sign_magnitude) {
  Tensor out = Tensor::empty(t.dtype(), t.shape());
  const uint8_t* in = t.ptr<uint8_t>();
  uint8_t* o = out.mutable_ptr<uint8_t>();
  const uint8_t sign = static_cast<uint8_t>(1u << (bits - 1));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (to_sign_magnitude) {
      const int v = static_cast<int8_t>(in[i]);
      o[i] = static_cast<uint8_t>(v < 0 ? (sign | -v) : v);
    } else {
      const int mag = in[i] & (sign - 1);
      o[i] = static_cast<uint8_t>((in[i] & sign) ? -mag : mag);
    }
  }
  return out;
}

int sparse_axis(const detail::CastPlan& p) {
  const int rank = static_cast<int>(p.perm.size());
  return p.sparse_dim == 1 ? p.perm[rank - 1] : p.perm[rank - 2];
}

}  // namespace

CastResult pack(const CastResult& a) {
  if (a.mode == CastMode::Compress) return a;
  if (a.options.flatten) return from_view(pack(as_view(a)), a.options, a.shape);
  if (a.mode != CastMode::Actual) throw Error("pack needs an actual-mode cast result");
  return detail::family_ops(a.dtype.family()).pack(a);
}

CastResult unpack(const CastResult& c) {
  if (c.mode == CastMode::Actual) return c;
  if (c.options.flatten) return from_view(unpack(as_view(c)), c.options, c.shape);
  if (c.mode != CastMode::Compress) throw Error("unpack needs a compressed cast result");
  return detail::family_ops(c.dtype.family()).unpack(c);
}

namespace detail {

namespace {

// The elements an N:M sparsity mask keeps, in order: fn(e, packed) with e the element's index in
// the dense tensor and `packed` its index where compression stores the kept ones, N slots per run
// of M along the sparse axis (`packed_len` = runs * N slots). `check`: a run keeping more than N
// is an error (a mask read back from a file).
template <typename Fn>
void for_each_kept(const AxisView& v, const CastPlan& p, int64_t runs, int64_t packed_len,
                   const uint8_t* mk, bool check, Fn fn) {
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t in = 0; in < v.inner; ++in)
      for (int64_t run = 0; run < runs; ++run) {
        int64_t slot = run * p.sp_n;
        for (int64_t k = run * p.sp_m; k < std::min(v.len, (run + 1) * p.sp_m); ++k) {
          const int64_t e = (o * v.len + k) * v.inner + in;
          if (!mk[e]) continue;
          if (check && slot >= (run + 1) * p.sp_n)
            throw Error("sparsity mask keeps more than N values in a run");
          fn(e, (o * packed_len + slot) * v.inner + in);
          ++slot;
        }
      }
}

}  // namespace

CastResult pack_standard(const CastResult& a) {
  detail::CastPlan p = detail::make_plan(a.shape, a.dtype, a.options);
  cpu::validate_actual(a, p);
  CastResult r = a;
  r.mode = CastMode::Compress;
  Tensor codes = a.codes;
  const Shape shape = a.shape.empty() ? Shape{1} : a.shape;
  if (p.sparse_dim >= 0) {
    const int ax = sparse_axis(p);
    AxisView v = view_axis(shape, ax);
    const int64_t runs = (v.len + p.sp_m - 1) / p.sp_m;
    Shape cs = shape;
    cs[ax] = runs * p.sp_n;
    Tensor out = Tensor::empty(codes.dtype(), cs);
    const size_t es = dtype_size(codes.dtype());
    const uint8_t* src = static_cast<const uint8_t*>(codes.data());
    uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
    for_each_kept(v, p, runs, cs[ax], a.mask.ptr<uint8_t>(), false, [&](int64_t e, int64_t packed) {
      std::memcpy(dst + packed * es, src + e * es, es);
    });
    codes = out;
  }
  const int bits = p.data.bits;
  if (sign_magnitude(p)) codes = convert_sign(codes, bits, true);
  const int nt = a.options.threads;
  if (bits <= 4) codes = pack_bits(codes, code_width(bits), nt);
  r.codes = codes;
  if (a.mask) r.mask = pack_bits(a.mask, 1, nt);
  if (a.meta) r.meta = pack_bits(a.meta, p.offset_bits, nt);
  return r;
}

CastResult unpack_standard(const CastResult& c) {
  detail::CastPlan p = detail::make_plan(c.shape, c.dtype, c.options);
  CastResult r = c;
  r.mode = CastMode::Actual;
  const Shape shape = c.shape.empty() ? Shape{1} : c.shape;
  Shape cs = shape;
  int ax = -1;
  int64_t runs = 0;
  if (p.sparse_dim >= 0) {
    ax = sparse_axis(p);
    runs = (shape[ax] + p.sp_m - 1) / p.sp_m;
    cs[ax] = runs * p.sp_n;
  }
  const int bits = p.data.bits;
  Tensor codes = c.codes;
  if (bits <= 4)
    codes = unpack_bits(codes, code_width(bits), cs, p.code_dtype, bits,
                        p.data.kind == scalar::Kind::Int && !sign_magnitude(p), "codes");
  if (!codes) throw Error("compressed result has no codes tensor");
  if (numel(codes.shape()) != numel(cs))
    throw Error("compressed codes tensor has " + std::to_string(codes.numel()) +
                " values, expected " + std::to_string(numel(cs)));
  if (p.sparse_dim >= 0) {
    if (!c.mask) throw Error("compressed sparse result has no mask");
    Tensor mask = unpack_bits(c.mask, 1, shape, DType::Bool, 1, false, "mask");
    AxisView v = view_axis(shape, ax);
    Tensor out = Tensor::empty(codes.dtype(), shape);
    const size_t es = dtype_size(codes.dtype());
    const uint8_t* src = static_cast<const uint8_t*>(codes.data());
    uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
    for_each_kept(v, p, runs, cs[ax], mask.ptr<uint8_t>(), true, [&](int64_t e, int64_t packed) {
      std::memcpy(dst + e * es, src + packed * es, es);
    });
    codes = out;
    r.mask = mask;
  }
  if (sign_magnitude(p)) codes = convert_sign(codes, bits, false);
  r.codes = codes.reshaped(c.shape);
  if (c.mask) r.mask = r.mask.reshaped(c.shape);
  if (p.sub)
    r.meta =
        unpack_bits(c.meta, p.offset_bits, p.meta_shape, DType::U8, p.offset_bits, false, "meta");
  return r;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------

namespace {

// The words of each option, the one a value prints as first; later rows are what else parses.
template <typename E>
struct Word {
  E value;
  const char* text;
};
constexpr Word<Round> kRoundWords[] = {{Round::Even, "even"},
                                       {Round::Away, "away"},
                                       {Round::Zero, "zero"},
                                       {Round::Stochastic, "stochastic"},
                                       {Round::Away, "nearest"}};
constexpr Word<ScaleMode> kScaleModeWords[] = {
    {ScaleMode::Floor, "floor"},
    {ScaleMode::Ceil, "ceil"},
    {ScaleMode::Midmax, "midmax"},
    {ScaleMode::Option3, "option3"},
    {ScaleMode::TopBinade, "topbinade"},
    {ScaleMode::Floor, "max"},
    {ScaleMode::Midmax, "auto"},
    {ScaleMode::Option3, "even"},
    // torchao's ScaleCalculationMode names (FLOOR, CEIL and EVEN are spelled as above): RCEIL
    // gives torchao's bits as topbinade does (tests/interop/test_torchao_scale_modes.py).
    {ScaleMode::TopBinade, "rceil"}};
constexpr Word<Overflow> kOverflowWords[] = {{Overflow::Saturate, "saturate"},
                                             {Overflow::IEEE, "ieee"}};
constexpr Word<CastMode> kCastModeWords[] = {
    {CastMode::Virtual, "virtual"}, {CastMode::Actual, "actual"}, {CastMode::Compress, "compress"}};

template <typename E, size_t N>
const char* word_of(const Word<E> (&words)[N], E v) {
  for (const Word<E>& w : words)
    if (w.value == v) return w.text;
  return "?";
}
// `expected` lists the words for the error that an unknown one gets.
template <typename E, size_t N>
E parse_word(const Word<E> (&words)[N], std::string_view s, const char* what,
             const char* expected) {
  for (const Word<E>& w : words)
    if (s == w.text) return w.value;
  throw Error(std::string(what) + " '" + std::string(s) + "': expected " + expected);
}

}  // namespace

const char* to_string(Round r) {
  return word_of(kRoundWords, r);
}
const char* to_string(ScaleMode m) {
  return word_of(kScaleModeWords, m);
}
const char* to_string(Overflow o) {
  return word_of(kOverflowWords, o);
}
const char* to_string(CastMode m) {
  return word_of(kCastModeWords, m);
}

Round parse_round(std::string_view s) {
  return parse_word(kRoundWords, s, "round mode", "even, away (nearest), zero or stochastic");
}
ScaleMode parse_scale_mode(std::string_view s) {
  return parse_word(kScaleModeWords, s, "scale mode",
                    "floor (max), ceil, midmax (auto), option3 (even) or topbinade (rceil)");
}
Overflow parse_overflow(std::string_view s) {
  return parse_word(kOverflowWords, s, "overflow policy", "saturate or ieee");
}
CastMode parse_cast_mode(std::string_view s) {
  return parse_word(kCastModeWords, s, "cast mode", "virtual, actual or compress");
}
Device parse_device(std::string_view s) {
  if (s == "auto") return Device::Auto;
  if (s == "cpu") return Device::CPU;
  if (s == "cuda" || s == "gpu") return Device::CUDA;
  throw Error("device '" + std::string(s) + "': expected auto, cpu or cuda");
}

}  // namespace castscope
