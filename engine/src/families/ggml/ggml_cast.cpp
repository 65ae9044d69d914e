// A row whose length is not a multiple of the block is padded with zeros to whole blocks (the
// padding takes part in the last block's scale, like a partial tile, and is dropped on decode);
// the codes then hold the padded blocks.
#include "families/ggml/ggml_cast.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "families/ggml/ggml_types.hpp"
#include "core/parallel.hpp"

namespace castscope::ggml {
namespace {

struct Rows {
  int64_t rows, len, blocks;  // rows, elements per row, blocks per row (padded)
};
Rows rows_of(const Shape& s, const TypeInfo& t) {
  Rows r;
  r.len = s.empty() ? 1 : s.back();
  r.rows = r.len ? numel(s) / r.len : 0;
  r.blocks = (r.len + t.block - 1) / t.block;
  return r;
}
Shape codes_shape(const Shape& s, const Rows& r, const TypeInfo& t) {
  Shape c = s.empty() ? Shape{1} : s;
  c.back() = r.blocks * t.block_bytes;
  return c;
}

}  // namespace

CastResult cast(const Tensor& x0, const DataType& d, const CastOptions& opt) {
  const TypeInfo& t = *type_info(d.ggml_type());
  if (!can_quantize(t.id)) throw Error(std::string("no quantizer for ggml type ") + t.name);
  const int rank = static_cast<int>(x0.shape().size());
  if (rank > 0 && opt.axis != -1 && opt.axis != rank - 1)
    throw Error(d.str() + " quantizes blocks along the last axis (ggml's rows); axis " +
                std::to_string(opt.axis) + " was asked for");
  const Tensor x = x0.dtype() == DType::F32 ? x0 : x0.to_f32();
  const Rows r = rows_of(x.shape(), t);
  const int64_t row_bytes = r.blocks * t.block_bytes;
  Tensor codes = Tensor::empty(DType::U8, codes_shape(x.shape(), r, t));
  uint8_t* out = codes.mutable_ptr<uint8_t>();
  const float* src = x.ptr<float>();
  CastResult res;
  // Blocks are independent, so any split of the rows over threads gives the same bytes.
  const int64_t padded = r.blocks * t.block;
  // Importance weights: set k for row i / (rows / k), as llama.cpp gives expert e its slice;
  // padding columns weigh nothing.
  std::vector<float> qw;
  int64_t rows_per_set = 0;
  if (opt.importance && takes_importance(t.id)) {
    const std::vector<float>& w = *opt.importance;
    const int64_t sets = r.len ? static_cast<int64_t>(w.size()) / r.len : 0;
    if (sets < 1 || static_cast<int64_t>(w.size()) != sets * r.len || r.rows % sets != 0)
      throw Error(d.str() + ": " + std::to_string(w.size()) +
                  " importance weights do not fit rows of " + std::to_string(r.len) + " (" +
                  std::to_string(r.rows) + " rows)");
    for (const float v : w)
      if (!std::isfinite(v) || v < 0)
        throw Error(d.str() + ": importance weights must be finite and non-negative");
    rows_per_set = r.rows / sets;
    qw.assign(static_cast<size_t>(sets * padded), 0.0f);
    for (int64_t k = 0; k < sets; ++k)
      std::copy(w.begin() + k * r.len, w.begin() + (k + 1) * r.len, qw.begin() + k * padded);
  }
  std::atomic<int64_t> nonfinite{0};
  detail::parallel_for(r.rows, std::max<int64_t>(1, 65536 / padded), opt.threads, opt.job,
                       [&](int64_t begin, int64_t end) {
                         std::vector<float> row(static_cast<size_t>(padded), 0.0f);
                         int64_t bad = 0;
                         for (int64_t i = begin; i < end; ++i) {
                           std::memcpy(row.data(), src + i * r.len, static_cast<size_t>(r.len) * 4);
                           for (int64_t j = 0; j < r.len; ++j) bad += !std::isfinite(row[j]);
                           const float* q =
                               rows_per_set ? qw.data() + (i / rows_per_set) * padded : nullptr;
                           quantize(t.id, row.data(), row.size(), out + i * row_bytes, q);
                         }
                         nonfinite += bad;
                       });
  res.counts.nonfinite = nonfinite.load();
  res.dtype = d;
  res.options = opt;
  res.shape = x0.shape();
  res.backend = "cpu";
  res.codes = codes;
  res.mode = CastMode::Actual;
  if (opt.mode == CastMode::Virtual) {
    res.values = ggml::upcast(res);
    res.codes = Tensor();
    res.mode = CastMode::Virtual;
  }
  return res;
}

Tensor upcast(const CastResult& a) {
  const TypeInfo& t = *type_info(a.dtype.ggml_type());
  const Rows r = rows_of(a.shape, t);
  if (a.codes.dtype() != DType::U8 || a.codes.shape() != codes_shape(a.shape, r, t))
    throw Error(a.dtype.str() + " codes must be U8 " + shape_str(codes_shape(a.shape, r, t)) +
                " (got " + shape_str(a.codes.shape()) + ")");
  Tensor out = Tensor::empty(DType::F32, a.shape);
  float* o = out.mutable_ptr<float>();
  const uint8_t* c = a.codes.ptr<uint8_t>();
  std::vector<float> row(static_cast<size_t>(r.blocks * t.block));
  for (int64_t i = 0; i < r.rows; ++i) {
    dequantize(t.id, c + i * r.blocks * t.block_bytes, row.size(), row.data());
    std::memcpy(o + i * r.len, row.data(), static_cast<size_t>(r.len) * 4);
  }
  return out;
}

// ggml quantizes rows: a virtual cast along another axis (MatMul's B [K, N] over K) runs on
// the tensor with that axis moved last, the values moved back. Actual codes keep ggml's row
// layout, so an actual cast along another axis is refused by ggml::cast.
std::optional<CastResult> cast_virtual_across(const Tensor& x, const DataType& dtype,
                                              const CastOptions& options) {
  const int rank = x.rank();
  const int ax = options.axis < 0 ? options.axis + rank : options.axis;
  if (rank < 2 || ax < 0 || ax >= rank - 1) return std::nullopt;
  int64_t outer = 1, inner = 1;
  const int64_t len = x.shape()[static_cast<size_t>(ax)];
  for (int i = 0; i < ax; ++i) outer *= x.shape()[static_cast<size_t>(i)];
  for (int i = ax + 1; i < rank; ++i) inner *= x.shape()[static_cast<size_t>(i)];
  const Tensor xf = x.dtype() == DType::F32 ? x : x.to_f32();
  Tensor t = Tensor::empty(DType::F32, {outer, inner, len});
  const float* src = xf.ptr<float>();
  float* dst = t.mutable_ptr<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < len; ++l)
      for (int64_t i = 0; i < inner; ++i)
        dst[(o * inner + i) * len + l] = src[(o * len + l) * inner + i];
  CastOptions to = options;
  to.axis = -1;
  CastResult r = castscope::cast(t, dtype, to);
  Tensor back = Tensor::empty(DType::F32, x.shape());
  const float* v = r.values.ptr<float>();
  float* b = back.mutable_ptr<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < len; ++l)
      for (int64_t i = 0; i < inner; ++i)
        b[(o * len + l) * inner + i] = v[(o * inner + i) * len + l];
  r.values = back;
  r.shape = x.shape();
  r.options.axis = options.axis;
  return r;
}

}  // namespace castscope::ggml
