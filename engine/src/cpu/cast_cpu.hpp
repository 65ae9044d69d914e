#pragma once

#include "castscope/cast.hpp"
#include "group.hpp"
#include "plan.hpp"

namespace castscope::cpu {

detail::KernelParams kernel_params(const detail::CastPlan& p);
// Standard (TensorCast-grammar) datatypes.
CastResult cast_standard(const Tensor& x, const DataType& dtype, const CastOptions& opt);
Tensor upcast_standard(const CastResult& actual);

}  // namespace castscope::cpu
