// GPU discovery: a missing or unusable GPU is a normal state with a reason, never a crash.
#include <cuda_runtime.h>

#include <string>

#include "backends/backend.hpp"

namespace castscope::cuda {

bool available(std::string* reason, std::string* device_name) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Without an NVIDIA driver the runtime reports a driver-version mismatch, which would send
    // a user looking for the wrong problem.
    if (reason)
      *reason =
          err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
              ? std::string("no NVIDIA GPU or driver found (CUDA: ") + cudaGetErrorString(err) + ")"
              : std::string("CUDA reports: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no CUDA device present";
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    if (reason) *reason = "cannot read the properties of CUDA device 0";
    cudaGetLastError();
    return false;
  }
  if (device_name) *device_name = prop.name;
  return true;
}

bool start_context(std::string* reason) {
  if (!available(reason, nullptr)) return false;
  // cudaFree(0) is the customary way to make the runtime create the primary context now.
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    if (reason) *reason = std::string("CUDA context: ") + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  return true;
}

}  // namespace castscope::cuda
