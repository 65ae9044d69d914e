// TCFP-8 / TCFP-12 / TCFP-16 (spec: tcfp.md): FP8-based formats with NormalFloat-aware block
// scales and FP8 / int4 residual terms. They go through the same cast API as every datatype;
// these are the family-specific entry points the dispatcher calls.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "castscope/cast.hpp"

namespace castscope::tcfp {

CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& opt);
Tensor upcast(const CastResult& actual);
CastResult pack(const CastResult& actual);
CastResult unpack(const CastResult& packed);

// Error feedback for TCFP-8 (tcfp.md): keeps, per named tensor, the quantization error of its
// last cast and adds it back before the next one, so rounding is unbiased over many steps.
class ErrorFeedback {
 public:
  // Casts x + carried error, stores the new error (x + carried - result), returns the values.
  Tensor step(const std::string& name, const Tensor& x, const DataType& dtype,
              const CastOptions& opt = {});
  void reset(const std::string& name);
  void clear();
  bool has(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Tensor> error_;
};

}  // namespace castscope::tcfp
