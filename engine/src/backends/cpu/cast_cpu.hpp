#pragma once

#include "castscope/cast.hpp"
#include "core/group.hpp"
#include "core/plan.hpp"

namespace castscope::cpu {

// Standard (TensorCast-grammar) datatypes.
CastResult cast_standard(const Tensor& x, const DataType& dtype, const CastOptions& opt);
Tensor upcast_standard(const CastResult& actual);
// Throws Error naming the tensor when an actual-mode result does not match its datatype's layout.
void validate_actual(const CastResult& actual, const detail::CastPlan& p);

}  // namespace castscope::cpu
