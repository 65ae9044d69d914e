// Tensors of a checkpoint streamed onto the GPU ahead of their use, for sweeps that visit every
// tensor once in a known order (the model map). A sweep that reads, widens and uploads each tensor
// on its own thread before casting it is bound by the host; here reader threads copy the stored
// bytes (bf16 as stored, half the bytes of float32) from the file map into a bounded pool of
// pinned staging buffers while an upload thread moves them to the device and widens them there to
// the float32 that the readers' load() gives, so reading, upload, widening and the consumer's
// device work overlap. Pinned memory is fixed (slots x slot size); device memory ahead of the
// consumer is bounded too (a tensor larger than the bound is still streamed, alone).
//
// Plain C++: callable from host code with or without CUDA; a build without CUDA gets no stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/device_api.hpp"
#include "castscope/io.hpp"

namespace castscope::gpu {

struct TensorStreamOptions {
  int readers = 4;                     // threads copying from the file map into pinned memory
  int slots = 8;                       // pinned staging buffers
  size_t slot_bytes = 64u << 20;       // bytes per staging buffer
  uint64_t device_ahead = 6ull << 30;  // device bytes held ahead of the consumer
};

// What the stream did, for benchmarks: seconds spent by the consumer waiting in next() and
// bytes moved.
struct TensorStreamStats {
  double wait_seconds = 0;
  uint64_t bytes = 0;
};

class TensorStream {
 public:
  virtual ~TensorStream() = default;
  // The next tensor of the list given at open, on the device as float32 in its stored shape
  // (exactly what uploading io::Model::load's tensor gives).
  // Empty where that tensor could not be streamed (a reader without stored-dtype access, a dtype
  // the device casts do not take, out of GPU memory): the caller loads it the ordinary way.
  // Blocks until it is on the device. Call once per listed name, in order.
  virtual DeviceTensor next() = 0;
  virtual TensorStreamStats stats() const = 0;
};

#ifdef CASTSCOPE_HAVE_CUDA
// Starts streaming `names` (in that order) from `model`. The model must outlive the stream.
// Returns null when no GPU is usable. Destroying the stream stops its threads.
std::unique_ptr<TensorStream> open_tensor_stream(const io::Model& model,
                                                 std::vector<std::string> names,
                                                 const TensorStreamOptions& opt = {});
#else
inline std::unique_ptr<TensorStream> open_tensor_stream(const io::Model&, std::vector<std::string>,
                                                        const TensorStreamOptions& = {}) {
  return nullptr;
}
#endif

}  // namespace castscope::gpu
