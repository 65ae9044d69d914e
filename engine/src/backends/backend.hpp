// The CUDA backend's entry points as the engine sees them. Built from src/cuda when CASTSCOPE_CUDA
// is on, from src/nocuda otherwise, so the engine links either way.
#pragma once

#include "castscope/cast.hpp"

namespace castscope::cuda {

// True when a usable GPU is present; otherwise `reason` says why not.
bool available(std::string* reason = nullptr, std::string* device_name = nullptr);
// Same contract and bits as the CPU engine. Throws Error when the GPU cannot do it (the caller
// falls back to the CPU).
CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& opt);
// Creates the CUDA context of device 0 (cudaSetDevice, cudaFree(0)). False, with reason, when
// there is no usable GPU.
bool start_context(std::string* reason = nullptr);

}  // namespace castscope::cuda
