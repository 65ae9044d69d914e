#include "backend.hpp"

namespace castscope::cuda {

CastResult cast(const Tensor&, const DataType&, const CastOptions&) {
  throw Error("the CUDA cast kernels are not in this build yet");
}

}  // namespace castscope::cuda
