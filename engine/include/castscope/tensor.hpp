// A minimal owning (or borrowing, for memory-mapped files) n-dimensional host tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "castscope/error.hpp"

namespace castscope {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  F8E4M3,
  F8E5M2,
  U8,
  I8,
  U16,
  I16,
  U32,
  I32,
  U64,
  I64,
  Bool
};

size_t dtype_size(DType d);
const char* dtype_name(DType d);  // "float32", "bfloat16", "uint8", ...
bool dtype_is_float(DType d);     // F32 / F16 / BF16 / F64 / F8*

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[4096, 4096]"

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised storage. Throws Error for negative dims or absurd sizes.
  static Tensor empty(DType dtype, Shape shape);
  // Storage left uninitialised, for outputs that are written in full.
  static Tensor uninitialized(DType dtype, Shape shape);
  // Borrow memory owned by `owner` (e.g. a memory map); the tensor keeps owner alive.
  static Tensor borrow(DType dtype, Shape shape, std::shared_ptr<const void> owner,
                       const void* data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return castscope::numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || (owner_ && numel() == 0); }
  explicit operator bool() const { return data_ != nullptr; }

  const void* data() const { return data_; }
  void* mutable_data();  // throws for borrowed (read-only) tensors
  template <class T>
  const T* ptr() const {
    return static_cast<const T*>(data_);
  }
  template <class T>
  T* mutable_ptr() {
    return static_cast<T*>(mutable_data());
  }

  // Same storage, new shape of equal element count.
  Tensor reshaped(Shape shape) const;
  // Element-wise conversion of any float / integer dtype to float32 (exact for f16 / bf16 / fp8).
  Tensor to_f32() const;
  // Deep copy into owned storage.
  Tensor clone() const;

 private:
  static Tensor allocated(DType dtype, Shape shape, bool zeroed);
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  bool writable_ = false;
};

// Keeps up to max_bytes of freed large tensor storage (2 MiB or more) for the next tensor of the
// same size, instead of handing it back to the system (0, the default: hand back at once). For a
// process that casts one tensor again and again (the app's views): fresh pages must be zeroed by
// the kernel on first touch, which made up a fifth of an update's CPU time.
void set_storage_reuse(size_t max_bytes);

// The same tensor: both defined, one storage, shape and dtype (what caches of a tensor's device
// copy or derived views key on; the holder keeps the storage alive so it cannot be reused).
bool same_storage(const Tensor& a, const Tensor& b);

// [rows, cols] float32 from the transpose of a row-major block whose row c starts at in + c * ld:
// out[r][c] = in[c * ld + r] (a column-major product, or a weight stored [in, out]).
Tensor transposed_f32(const float* in, int64_t rows, int64_t cols, int64_t ld);

// Bit conversions shared by loaders and the engine.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);  // round to nearest even

}  // namespace castscope
