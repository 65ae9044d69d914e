#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "castscope/format.hpp"
#include "castscope/scalar.hpp"
#include "castscope/tensor.hpp"
#include "core/dtype_format.hpp"

namespace castscope {

namespace {

// What each DType is: bytes per element, its name, and the number format whose codes it stores
// (the unscaled datatype that casts to it; null for the integers and float64). In enum order.
struct DTypeFacts {
  DType dtype;
  size_t size;
  const char* name;
  const char* format;
};
constexpr DTypeFacts kDTypes[] = {{DType::F32, 4, "float32", "float32"},
                                  {DType::F16, 2, "float16", "float16"},
                                  {DType::BF16, 2, "bfloat16", "bfloat16"},
                                  {DType::F64, 8, "float64", nullptr},
                                  {DType::F8E4M3, 1, "float8_e4m3fn", "e4m3fn"},
                                  {DType::F8E5M2, 1, "float8_e5m2", "e5m2"},
                                  {DType::U8, 1, "uint8", nullptr},
                                  {DType::I8, 1, "int8", nullptr},
                                  {DType::U16, 2, "uint16", nullptr},
                                  {DType::I16, 2, "int16", nullptr},
                                  {DType::U32, 4, "uint32", nullptr},
                                  {DType::I32, 4, "int32", nullptr},
                                  {DType::U64, 8, "uint64", nullptr},
                                  {DType::I64, 8, "int64", nullptr},
                                  {DType::Bool, 1, "bool", nullptr}};
constexpr size_t kDTypeCount = sizeof kDTypes / sizeof kDTypes[0];

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kDTypeCount; ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(in_enum_order() && kDTypeCount == static_cast<size_t>(DType::Bool) + 1);

const DTypeFacts* facts(DType d) {
  const size_t i = static_cast<size_t>(d);
  return i < kDTypeCount ? &kDTypes[i] : nullptr;
}

}  // namespace

size_t dtype_size(DType d) {
  const DTypeFacts* f = facts(d);
  return f ? f->size : 1;
}

const char* dtype_name(DType d) {
  const DTypeFacts* f = facts(d);
  return f ? f->name : "?";
}

const char* dtype_format(DType d) {
  const DTypeFacts* f = facts(d);
  return f ? f->format : nullptr;
}

std::optional<DType> dtype_of_format(const std::string& format) {
  for (const DTypeFacts& f : kDTypes)
    if (f.format && format == f.format) return f.dtype;
  return std::nullopt;
}

bool dtype_is_float(DType d) {
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64 ||
         d == DType::F8E4M3 || d == DType::F8E5M2;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

static void check_shape(const Shape& shape, DType dtype) {
  __int128 n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("tensor shape " + shape_str(shape) + " has a negative dimension");
    n *= d;
    if (n > (__int128{1} << 46)) throw Error("tensor shape " + shape_str(shape) + " is too large");
  }
  if (n * static_cast<__int128>(dtype_size(dtype)) > (__int128{1} << 47))
    throw Error("tensor shape " + shape_str(shape) + " is too large");
}

#if defined(__linux__)
namespace {

// Large mappings freed lately, kept for the next tensor of the same length when a process asked
// for it (set_storage_reuse): a cast repeated on one tensor, as the app's views after each change
// of datatype, then writes into memory it already has instead of pages the kernel must zero
// again. Bounded in bytes; off by default, so the CLI's and exporters' peak memory is unchanged.
struct MapCache {
  std::mutex mu;
  std::vector<std::pair<void*, size_t>> spare;  // oldest first
  size_t bytes = 0, limit = 0;
};

MapCache& map_cache() {
  static MapCache* c = new MapCache;  // never destroyed: tensors may be freed during exit
  return *c;
}

void* reuse_mapping(size_t len) {
  MapCache& c = map_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = c.spare.size(); i-- > 0;)
    if (c.spare[i].second == len) {
      void* p = c.spare[i].first;
      c.spare.erase(c.spare.begin() + static_cast<std::ptrdiff_t>(i));
      c.bytes -= len;
      return p;
    }
  return nullptr;
}

void release_mapping(void* p, size_t len) {
  MapCache& c = map_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (len <= c.limit) {
    c.spare.emplace_back(p, len);
    c.bytes += len;
    while (c.bytes > c.limit) {
      munmap(c.spare.front().first, c.spare.front().second);
      c.bytes -= c.spare.front().second;
      c.spare.erase(c.spare.begin());
    }
    return;
  }
  munmap(p, len);
}

}  // namespace
#endif

void set_storage_reuse(size_t max_bytes) {
#if defined(__linux__)
  MapCache& c = map_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limit = max_bytes;
  while (c.bytes > c.limit) {
    munmap(c.spare.front().first, c.spare.front().second);
    c.bytes -= c.spare.front().second;
    c.spare.erase(c.spare.begin());
  }
#else
  (void)max_bytes;
#endif
}

// Storage of a new tensor. Large buffers are mapped directly, 2 MiB aligned and marked for
// transparent huge pages: a fresh 64 MiB cast output otherwise takes 16384 page faults, which cost
// more than the cast itself (a float32 -> bfloat16 pass over 4096x4096 values spent 70% of
// its time in the kernel). Mapped pages are zero, so zero-initialised tensors need no memset.
static std::shared_ptr<void> allocate(size_t bytes, bool zeroed) {
#if defined(__linux__)
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes >= kHuge) {
    // Only whole 2 MiB pieces become huge pages; the tail keeps small pages, so a tensor never
    // holds more than 4 KiB beyond its size.
    const size_t len = (bytes + 4095) / 4096 * 4096;
    if (void* q = reuse_mapping(len)) {
      if (zeroed) std::memset(q, 0, bytes);
      return std::shared_ptr<void>(q, [len](void* r) { release_mapping(r, len); });
    }
    void* m =
        mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
    // Trim the mapping to a 2 MiB aligned start.
    uint8_t* base = static_cast<uint8_t*>(m);
    uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) &
                                            ~uintptr_t{kHuge - 1});
    if (p > base) munmap(base, static_cast<size_t>(p - base));
    munmap(p + len, static_cast<size_t>(base + kHuge - p));  // p - base < kHuge: never empty
    madvise(p, len, MADV_HUGEPAGE);
    return std::shared_ptr<void>(p, [len](void* q) { release_mapping(q, len); });
  }
#endif
  uint8_t* p = zeroed ? new uint8_t[bytes ? bytes : 1]() : new uint8_t[bytes ? bytes : 1];
  return std::shared_ptr<void>(p, [](void* q) { delete[] static_cast<uint8_t*>(q); });
}

Tensor Tensor::allocated(DType dtype, Shape shape, bool zeroed) {
  check_shape(shape, dtype);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = allocate(t.nbytes(), zeroed);
  t.data_ = t.owner_.get();
  t.writable_ = true;
  return t;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  return allocated(dtype, std::move(shape), true);
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  return allocated(dtype, std::move(shape), false);
}

Tensor Tensor::borrow(DType dtype, Shape shape, std::shared_ptr<const void> owner,
                      const void* data) {
  check_shape(shape, dtype);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.writable_ = false;
  return t;
}

void* Tensor::mutable_data() {
  if (!writable_) throw Error("tensor is read-only (borrowed from a file)");
  return const_cast<void*>(data_);
}

Tensor Tensor::reshaped(Shape shape) const {
  if (castscope::numel(shape) != numel())
    throw Error("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(dtype_, shape_);
  if (nbytes()) std::memcpy(t.mutable_data(), data_, nbytes());
  return t;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0x1F) return scalar::bits_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24
    return sign ? -v : v;
  }
  return scalar::bits_float(sign | ((e + 112) << 23) | (m << 13));
}

static uint16_t round_float_bits(float f, const scalar::Format& fmt) {
  if (std::isnan(f)) return static_cast<uint16_t>(scalar::nan_code(fmt));
  scalar::Quantized q;
  if (std::isinf(f)) {
    q.inf = true;
    q.neg = f < 0;
  } else {
    q = scalar::quantize(f, fmt, scalar::Round::Even, scalar::Overflow::IEEE, 0);
  }
  return static_cast<uint16_t>(scalar::encode(q, fmt));
}

uint16_t float_to_half(float f) {
  static const scalar::Format fmt = NumberSpec::parse("float16").format();
  return round_float_bits(f, fmt);
}
float bf16_to_float(uint16_t b) {
  return scalar::bits_float(static_cast<uint32_t>(b) << 16);
}
uint16_t float_to_bf16(float f) {
  static const scalar::Format fmt = NumberSpec::parse("bfloat16").format();
  return round_float_bits(f, fmt);
}

bool same_storage(const Tensor& a, const Tensor& b) {
  return a && b && a.data() == b.data() && a.shape() == b.shape() && a.dtype() == b.dtype();
}

Tensor transposed_f32(const float* in, int64_t rows, int64_t cols, int64_t ld) {
  Tensor t = Tensor::empty(DType::F32, {rows, cols});
  float* p = t.mutable_ptr<float>();
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) p[r * cols + c] = in[c * ld + r];
  return t;
}

Tensor Tensor::to_f32() const {
  Tensor out = empty(DType::F32, shape_);
  float* o = out.mutable_ptr<float>();
  const int64_t n = numel();
  static const scalar::Format f43 = NumberSpec::parse("e4m3fn").format();
  static const scalar::Format f52 = NumberSpec::parse("e5m2").format();
  auto fp8 = [](uint8_t c, bool e4m3) {
    return static_cast<float>(scalar::decode_value(c, e4m3 ? f43 : f52));
  };
  switch (dtype_) {
    case DType::F32:
      std::memcpy(o, data_, nbytes());
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(ptr<double>()[i]);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) o[i] = half_to_float(ptr<uint16_t>()[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_float(ptr<uint16_t>()[i]);
      break;
    case DType::F8E4M3:
      for (int64_t i = 0; i < n; ++i) o[i] = fp8(ptr<uint8_t>()[i], true);
      break;
    case DType::F8E5M2:
      for (int64_t i = 0; i < n; ++i) o[i] = fp8(ptr<uint8_t>()[i], false);
      break;
    case DType::U8:
    case DType::Bool:
      for (int64_t i = 0; i < n; ++i) o[i] = ptr<uint8_t>()[i];
      break;
    case DType::I8:
      for (int64_t i = 0; i < n; ++i) o[i] = ptr<int8_t>()[i];
      break;
    case DType::U16:
      for (int64_t i = 0; i < n; ++i) o[i] = ptr<uint16_t>()[i];
      break;
    case DType::I16:
      for (int64_t i = 0; i < n; ++i) o[i] = ptr<int16_t>()[i];
      break;
    case DType::U32:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(ptr<uint32_t>()[i]);
      break;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(ptr<int32_t>()[i]);
      break;
    case DType::U64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(ptr<uint64_t>()[i]);
      break;
    case DType::I64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(ptr<int64_t>()[i]);
      break;
  }
  return out;
}

}  // namespace castscope
