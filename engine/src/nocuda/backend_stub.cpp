#include "backend.hpp"

namespace castscope::cuda {

bool available(std::string* reason, std::string* device_name) {
  if (reason) *reason = "this build has no CUDA backend (configured with CASTSCOPE_CUDA=OFF)";
  if (device_name) device_name->clear();
  return false;
}

CastResult cast(const Tensor&, const DataType&, const CastOptions&) {
  throw Error("this build has no CUDA backend (configured with CASTSCOPE_CUDA=OFF)");
}

}  // namespace castscope::cuda
