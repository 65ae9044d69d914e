#include <cstring>

#include "core/dtype_format.hpp"
#include "core/plan.hpp"

namespace castscope::detail {

DType storage_dtype(const NumberSpec& n) {
  if (const std::optional<DType> d = dtype_of_format(n.name())) return *d;
  if (n.is_int()) return n.bits() <= 8 ? DType::I8 : n.bits() <= 16 ? DType::I16 : DType::I32;
  return n.bits() <= 8 ? DType::U8 : n.bits() <= 16 ? DType::U16 : DType::U32;
}

void store_code(void* base, DType d, int64_t i, uint32_t code, const scalar::Format& f) {
  if (f.kind == scalar::Kind::Int && f.bits < 32 && ((code >> (f.bits - 1)) & 1u))
    code |= ~((1u << f.bits) - 1);  // sign-extend into the storage width
  switch (dtype_size(d)) {
    case 1:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(code);
      break;
    case 2:
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(code);
      break;
    default:
      static_cast<uint32_t*>(base)[i] = code;
      break;
  }
}

uint32_t load_code(const void* base, DType d, int64_t i, const scalar::Format& f) {
  uint32_t c;
  switch (dtype_size(d)) {
    case 1:
      c = static_cast<const uint8_t*>(base)[i];
      break;
    case 2:
      c = static_cast<const uint16_t*>(base)[i];
      break;
    default:
      c = static_cast<const uint32_t*>(base)[i];
      break;
  }
  return f.bits >= 32 ? c : c & ((1u << f.bits) - 1);
}

namespace {

void permute_impl(const uint8_t* src, uint8_t* dst, size_t esize, const Shape& shape,
                  const std::vector<int>& perm, bool inverse) {
  const int r = static_cast<int>(shape.size());
  std::vector<int64_t> sstride(r);
  int64_t s = 1;
  for (int i = r - 1; i >= 0; --i) {
    sstride[i] = s;
    s *= shape[i];
  }
  // Walk the permuted tensor in order; its axis i is source axis perm[i].
  Shape pshape(r);
  std::vector<int64_t> pstride(r);
  for (int i = 0; i < r; ++i) {
    pshape[i] = shape[perm[i]];
    pstride[i] = sstride[perm[i]];
  }
  const int64_t n = numel(shape);
  if (n == 0) return;
  // The innermost permuted axis is contiguous in neither layout in general; copy element-wise.
  std::vector<int64_t> idx(r, 0);
  int64_t src_off = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (!inverse)
      std::memcpy(dst + k * esize, src + src_off * esize, esize);
    else
      std::memcpy(dst + src_off * esize, src + k * esize, esize);
    for (int i = r - 1; i >= 0; --i) {
      ++idx[i];
      src_off += pstride[i];
      if (idx[i] < pshape[i]) break;
      src_off -= pstride[i] * pshape[i];
      idx[i] = 0;
    }
  }
}

}  // namespace

void permute(const void* src, void* dst, size_t esize, const Shape& shape,
             const std::vector<int>& perm) {
  permute_impl(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), esize, shape, perm,
               false);
}

void unpermute(const void* src, void* dst, size_t esize, const Shape& in_shape,
               const std::vector<int>& perm) {
  permute_impl(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), esize, in_shape, perm,
               true);
}

Shape permuted_shape(const Shape& original, const std::vector<int>& perm) {
  Shape s(original.size());
  for (size_t i = 0; i < original.size(); ++i) s[i] = original[perm[i]];
  return s;
}

Tensor permuted(const Tensor& t, const CastPlan& p) {
  if (!t || !p.permuted) return t;
  Tensor o = Tensor::empty(t.dtype(), permuted_shape(t.shape(), p.perm));
  permute(t.data(), o.mutable_data(), dtype_size(t.dtype()), t.shape(), p.perm);
  return o;
}

Tensor restored(const Tensor& t, const CastPlan& p, const Shape& shape) {
  if (!p.permuted) return t.reshaped(shape);
  Tensor o = Tensor::empty(t.dtype(), shape);
  unpermute(t.data(), o.mutable_data(), dtype_size(t.dtype()), shape, p.perm);
  return o;
}

CastPlan make_plan(const Shape& shape, const DataType& dtype, const CastOptions& opt) {
  CastPlan p;
  p.dtype = dtype;
  p.opt = opt;
  p.in_shape = shape;
  const int rank = static_cast<int>(shape.size());
  const int64_t n = numel(shape);
  if (n == 0) throw Error("cannot cast an empty tensor (shape " + shape_str(shape) + ")");
  const NumberSpec& num = dtype.number();
  p.data = num.format();
  p.data_codes = num.format();
  p.code_dtype = storage_dtype(num);
  p.scaled = dtype.scaled();
  const int rank1 = rank == 0 ? 1 : rank;
  Shape s = rank == 0 ? Shape{1} : shape;
  p.perm.resize(rank1);
  for (int i = 0; i < rank1; ++i) p.perm[i] = i;
  p.perm_shape = s;
  p.B = 1;
  p.R = 1;
  p.C = n;
  p.data_max = num.max();
  if (!p.scaled) return p;

  const ScaleSpec& sc = *dtype.scale();
  p.scale = sc.scale.format();
  p.scale_is_exponent = sc.scale.is_exponent();
  p.scale_dtype = storage_dtype(sc.scale);
  if (sc.second) {
    p.second = sc.second->format();
    p.second_dtype = storage_dtype(*sc.second);
  }
  if (num.is_uint()) p.zero_kind = sc.second->is_int() ? 2 : 1;
  p.multiscale = dtype.multiscale();
  if ((num.is_int() && !p.scale_is_exponent) || num.is_uint()) {
    p.data = num.integer_grid();
    p.data_max = static_cast<double>(p.data.maxr);
  }
  const int ntiles = static_cast<int>(sc.tiles.size());
  if (ntiles == 0) {
    p.tensor_scope = true;
    p.tr = 1;
    p.tc = n;
    p.gr = p.gc = 1;
    p.scale_shape = {1};
    return p;
  }
  int axis = opt.axis < 0 ? opt.axis + rank1 : opt.axis;
  if (axis < 0 || axis >= rank1)
    throw Error("tile axis " + std::to_string(opt.axis) + " is out of range for a tensor of rank " +
                std::to_string(rank));
  int first = axis - (ntiles - 1);
  if (first < 0)
    throw Error("a 2-D tile covers axes (axis-1, axis); axis " + std::to_string(opt.axis) +
                " has no axis before it in shape " + shape_str(shape));
  // Move the tile axes to the end, keeping the other axes in order.
  std::vector<int> perm;
  for (int i = 0; i < rank1; ++i)
    if (i < first || i > axis) perm.push_back(i);
  for (int i = first; i <= axis; ++i) perm.push_back(i);
  p.perm = perm;
  p.permuted = false;
  for (int i = 0; i < rank1; ++i) p.permuted |= perm[i] != i;
  for (int i = 0; i < rank1; ++i) p.perm_shape[i] = s[perm[i]];
  p.C = p.perm_shape[rank1 - 1];
  p.R = ntiles == 2 ? p.perm_shape[rank1 - 2] : 1;
  p.B = n / (p.R * p.C);
  const TileSpec& tcol = sc.tiles.back();
  p.tc = tcol.channel() ? p.C : tcol.size;
  if (ntiles == 2) p.tr = sc.tiles[0].channel() ? p.R : sc.tiles[0].size;
  // A tile longer than its axis is one partial tile (docs/formats.md, "Shapes, padding and
  // axes"): a conv kernel axis of 3 or a [1, 128] weight under 128x128 blocks still casts.
  p.gc = (p.C + p.tc - 1) / p.tc;
  p.gr = (p.R + p.tr - 1) / p.tr;
  for (int i = 0; i < ntiles; ++i) {
    const TileSpec& t = sc.tiles[i];
    if (t.sparse()) {
      p.sparse_dim = (ntiles == 2 && i == 0) ? 0 : 1;
      p.sp_n = t.n;
      p.sp_m = t.m;
    }
  }
  if (tcol.sub) {
    if (ntiles != 1)
      throw Error("datatype " + dtype.str() + ": subtiles are supported with 1-D tiles only");
    p.sub = tcol.sub;
    p.offset_bits = tcol.offset;
  }
  // Scale shape: the permuted shape with the tile dims replaced by group counts, back in the
  // input's axis order.
  Shape ps = p.perm_shape;
  ps[rank1 - 1] = p.gc;
  if (ntiles == 2) ps[rank1 - 2] = p.gr;
  Shape ms = p.perm_shape;
  if (p.sub) ms[rank1 - 1] = p.gc * (p.tc / p.sub);
  p.scale_shape.assign(rank1, 0);
  p.meta_shape.assign(rank1, 0);
  for (int i = 0; i < rank1; ++i) {
    p.scale_shape[perm[i]] = ps[i];
    p.meta_shape[perm[i]] = ms[i];
  }
  return p;
}

KernelParams kernel_params(const CastPlan& p) {
  KernelParams kp;
  kp.data = p.data;
  kp.data_codes = p.data;
  kp.scale = p.scale;
  kp.second = p.second;
  kp.scaled = p.scaled;
  kp.scale_is_exponent = p.scale_is_exponent;
  kp.multiscale = p.multiscale;
  kp.zero_kind = p.zero_kind;
  kp.data_max = p.data_max;
  kp.round = p.opt.round;
  kp.overflow = p.opt.overflow;
  kp.scale_mode = p.opt.scale_mode;
  kp.seed = p.opt.seed;
  kp.offset_bits = p.offset_bits;
  return kp;
}

}  // namespace castscope::detail
