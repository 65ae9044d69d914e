#pragma once

#include "castscope/cast.hpp"
#include "core/group.hpp"
#include "core/plan.hpp"

namespace castscope::cpu {

// Standard (TensorCast-grammar) datatypes.
CastResult cast_standard(const Tensor& x, const DataType& dtype, const CastOptions& opt);
// An actual cast (opt.mode Actual, axis resolved, no flatten or rotation) whose result also
// holds the values, written by the same run of the kernels: upcast_standard()'s bits, as a
// virtual cast gives them, without a second cast. Without codes the result holds everything but
// the codes (scales, tensor scale, masks, offsets, counts: what views of the values need), from
// the virtual cast's kernels.
CastResult cast_standard_with_values(const Tensor& x, const DataType& dtype, const CastOptions& opt,
                                     bool codes = true);
Tensor upcast_standard(const CastResult& actual);
// Throws Error naming the tensor when an actual-mode result does not match its datatype's layout.
void validate_actual(const CastResult& actual, const detail::CastPlan& p);

}  // namespace castscope::cpu
