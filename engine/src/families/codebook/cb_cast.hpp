// Codebook datatypes (the codebook family) through the common cast API: the entry points the
// dispatcher calls, and the layout shared with the CUDA backend.
#pragma once

#include <vector>

#include "castscope/cast.hpp"
#include "families/codebook/cb_block.hpp"
#include "core/plan.hpp"

namespace castscope::codebook {

// Layout of a codebook cast: the plan of the compute format with the same 1-D tile (no subtile),
// plus the subtile geometry and the mapping magnitudes.
struct Layout {
  detail::CastPlan plan;
  int tile = 0, sub = 0;
  int64_t subs_per_row = 0;  // meta entries along the tile axis: gc * tile / sub
  Shape meta_perm_shape;     // meta in the permuted (tile axis last) order
  Shape meta_shape;          // meta in the input's axis order
  std::vector<double> mags;  // nmaps * half, see detail::cb::Params
  detail::cb::Params base;   // everything but the table pointer
  detail::cb::Params params() const {
    detail::cb::Params p = base;
    p.mags = mags.data();
    return p;
  }
};

Layout make_layout(const Shape& shape, const DataType& dtype, const CastOptions& opt);

CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& opt);
// The input in the layout's permuted order, as F32 or F64 (the shared first step of backends).
Tensor permuted_input(const Tensor& x, const Layout& l);
// A cast result from permuted outputs (values for virtual casts; codes, the flat scale codes
// and meta otherwise), in the input's axis order.
CastResult assemble(const Tensor& x, const DataType& dtype, const CastOptions& opt, const Layout& l,
                    const Tensor& values, const Tensor& codes, const Tensor& scale,
                    const Tensor& meta, const CastCounts& counts);
// Checks an actual result's parts against the layout (clear Error naming the part).
void validate_actual(const CastResult& a, const Layout& l);
Tensor upcast(const CastResult& actual);
CastResult pack(const CastResult& actual);
CastResult unpack(const CastResult& packed);
// Bits a code / meta entry occupies in the packed layout.
int packed_width(int bits);

}  // namespace castscope::codebook
