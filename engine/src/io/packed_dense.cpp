#include "io/packed_dense.hpp"

#include <algorithm>

#include "families/codebook/cb_cast.hpp"
#include "core/plan.hpp"

namespace castscope::io::detail {
namespace {

bool integer_storage(DType d) {
  switch (d) {
    case DType::U8:
    case DType::I8:
    case DType::U16:
    case DType::I16:
    case DType::U32:
    case DType::I32:
      return true;
    default:
      return false;
  }
}

// A part holding one storage element per value: dense when the values are narrower.
void add_elements(std::vector<DenseField>& out, Tensor CastResult::*m, DType storage, int bits,
                  bool sign) {
  const int field = 8 * static_cast<int>(dtype_size(storage));
  if (integer_storage(storage) && bits < field) out.push_back({m, field, 0, bits, sign});
}

// A part of `width`-bit fields packed into bytes along its last axis, `len` fields a row.
void add_fields(std::vector<DenseField>& out, Tensor CastResult::*m, int width, int bits,
                int64_t len, bool sign) {
  out.push_back({m, width, len, bits, sign});
}

}  // namespace

std::vector<DenseField> dense_fields(const CastResult& result) {
  std::vector<DenseField> out;
  if (result.mode != CastMode::Compress) return out;
  const CastResult r = as_view(result);
  const Shape shape = r.shape.empty() ? Shape{1} : r.shape;
  CastOptions o = r.options;
  o.mode = CastMode::Compress;
  const FamilyTraits& ft = family_traits(r.dtype.family());
  if (ft.grammar) {
    const castscope::detail::CastPlan p = castscope::detail::make_plan(r.shape, r.dtype, o);
    const int bits = p.data.bits;
    // Shared-microexponent integers (MX9 / MX6 / MX4) are sign-magnitude in their fields.
    const bool sign = p.data.kind == scalar::Kind::Int && !p.sub;
    if (bits <= 4) {
      // The codes' last axis after sparsity drops the pruned values (pack() in cast.cpp).
      int64_t len = shape.back();
      if (p.sparse_dim >= 0) {
        const int rank = static_cast<int>(p.perm.size());
        const int ax = p.sparse_dim == 1 ? p.perm[rank - 1] : p.perm[rank - 2];
        if (ax == static_cast<int>(shape.size()) - 1)
          len = (shape.back() + p.sp_m - 1) / p.sp_m * p.sp_n;
      }
      add_fields(out, &CastResult::codes, bits <= 2 ? 2 : 4, bits, len, sign);
    } else {
      add_elements(out, &CastResult::codes, p.code_dtype, bits, sign);
    }
    if (p.scaled) {
      add_elements(out, &CastResult::scale, p.scale_dtype, p.scale.bits,
                   p.scale.kind == scalar::Kind::Int);
      if (p.zero_kind)
        add_elements(out, &CastResult::zero, p.second_dtype, p.second.bits,
                     p.second.kind == scalar::Kind::Int);
    }
    if (p.sparse_dim >= 0) add_fields(out, &CastResult::mask, 1, 1, shape.back(), false);
    if (p.sub)
      add_fields(out, &CastResult::meta, p.offset_bits, p.offset_bits, p.meta_shape.back(), false);
  } else if (r.dtype.codebook()) {
    const codebook::Layout l = codebook::make_layout(r.shape, r.dtype, o);
    const Codebook& cb = *r.dtype.codebook();
    const int iw = codebook::packed_width(cb.index_bits), mw = codebook::packed_width(cb.meta_bits);
    if (iw < 8)
      add_fields(out, &CastResult::codes, iw, cb.index_bits, shape.back(), false);
    else
      add_elements(out, &CastResult::codes, DType::U8, cb.index_bits, false);
    if (mw < 8)
      add_fields(out, &CastResult::meta, mw, cb.meta_bits, l.meta_shape.back(), false);
    else
      add_elements(out, &CastResult::meta, DType::U8, cb.meta_bits, false);
    add_elements(out, &CastResult::scale, l.plan.scale_dtype, l.plan.scale.bits,
                 l.plan.scale.kind == scalar::Kind::Int);
  } else if (ft.packed_residual_bits) {
    // TCFP-12's int4 residuals two per byte along the codes' last axis (tcfp::pack).
    add_fields(out, &CastResult::residual, ft.packed_residual_bits, ft.packed_residual_bits,
               shape.back(), true);
  }  // TCFP-8 / 16 are byte-sized; ggml blocks are packed already
  return out;
}

namespace {

int64_t values_of(const DenseField& f, const Tensor& t) {
  if (f.field >= 8) return t.numel();
  const int64_t per = 8 / f.field;
  const int64_t plast = (f.len + per - 1) / per;
  if (plast == 0 || t.numel() % plast) throw Error("packed part does not hold whole rows");
  return t.numel() / plast * f.len;
}

}  // namespace

bool dense_differs(const DenseField& f) {
  return f.bits != f.field || (f.field < 8 && f.len % (8 / f.field) != 0);
}

uint64_t dense_nbytes(const DenseField& f, const Tensor& t) {
  return (static_cast<uint64_t>(values_of(f, t)) * static_cast<uint64_t>(f.bits) + 7) / 8;
}

Tensor to_dense(const DenseField& f, const Tensor& t) {
  const int64_t n = values_of(f, t);
  Tensor out = Tensor::empty(DType::U8, {static_cast<int64_t>(dense_nbytes(f, t))});
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  const uint8_t* src = static_cast<const uint8_t*>(t.data());
  const uint64_t vmask = (uint64_t{1} << f.bits) - 1;
  uint64_t acc = 0;
  int have = 0;
  int64_t o = 0;
  auto put = [&](uint64_t v) {
    acc |= (v & vmask) << have;
    have += f.bits;
    while (have >= 8) {
      dst[o++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      have -= 8;
    }
  };
  if (f.field >= 8) {
    const int es = f.field / 8;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = 0;
      for (int b = 0; b < es; ++b) v |= static_cast<uint64_t>(src[i * es + b]) << (8 * b);
      put(v);
    }
  } else {
    const int64_t per = 8 / f.field, plast = (f.len + per - 1) / per, rows = n / f.len;
    const unsigned fmask = (1u << f.field) - 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < f.len; ++k)
        put((src[r * plast + k / per] >> ((k % per) * f.field)) & fmask);
  }
  if (have > 0) dst[o++] = static_cast<uint8_t>(acc);
  return out;
}

Tensor from_dense(const DenseField& f, const uint8_t* data, uint64_t nbytes, DType dtype,
                  const Shape& shape) {
  Tensor out = Tensor::empty(dtype, shape);
  const int64_t n = values_of(f, out);
  const uint64_t want = (static_cast<uint64_t>(n) * static_cast<uint64_t>(f.bits) + 7) / 8;
  if (nbytes != want)
    throw Error("dense part has " + std::to_string(nbytes) + " bytes, expected " +
                std::to_string(want) + " (" + std::to_string(n) + " values of " +
                std::to_string(f.bits) + " bits)");
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  std::fill(dst, dst + out.nbytes(), uint8_t{0});
  const uint64_t vmask = (uint64_t{1} << f.bits) - 1;
  uint64_t acc = 0;
  int have = 0;
  uint64_t in = 0;
  auto get = [&]() {
    while (have < f.bits) {
      acc |= static_cast<uint64_t>(data[in++]) << have;
      have += 8;
    }
    uint64_t v = acc & vmask;
    acc >>= f.bits;
    have -= f.bits;
    if (f.sign && ((v >> (f.bits - 1)) & 1)) v |= ~vmask;  // sign-extend into the field
    return v;
  };
  if (f.field >= 8) {
    const int es = f.field / 8;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t v = get();
      for (int b = 0; b < es; ++b) dst[i * es + b] = static_cast<uint8_t>(v >> (8 * b));
    }
  } else {
    const int64_t per = 8 / f.field, plast = (f.len + per - 1) / per, rows = n / f.len;
    const unsigned fmask = (1u << f.field) - 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < f.len; ++k)
        dst[r * plast + k / per] |= static_cast<uint8_t>((get() & fmask) << ((k % per) * f.field));
  }
  return out;
}

}  // namespace castscope::io::detail
