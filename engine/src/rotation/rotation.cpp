// Block Hadamard rotation: parsing, validation, the CPU path, and the wrap of cast() / upcast().
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/backend.hpp"
#include "castscope/executor.hpp"
#include "castscope/rotate.hpp"
#include "core/parallel.hpp"
#include "rotation/hadamard.hpp"
#include "rotation/rotation_backend.hpp"

namespace castscope {

std::string Rotation::str() const {
  if (!enabled()) return "none";
  std::string s = "h" + std::to_string(size);
  if (random_signs) s += "r" + std::to_string(seed);
  return s;
}

void validate_rotation(const Rotation& r, const std::string& what) {
  if (r.size == 0) return;
  if (r.size < 16 || r.size > rotation::kMaxBlock || (r.size & (r.size - 1)) != 0)
    throw Error(what + ": Hadamard block size " + std::to_string(r.size) +
                " is not one of 16, 32, 64, 128, 256");
}

Rotation parse_rotation(std::string_view text) {
  const std::string t(text);
  Rotation r;
  if (t.empty() || t == "none" || t == "0") return r;
  auto bad = [&]() -> Error {
    return Error("rotation '" + t + "': expected none, N, hN or hNrSEED with N in 16..256");
  };
  size_t i = t[0] == 'h' ? 1 : 0;
  size_t j = i;
  while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
  if (j == i || j - i > 3) throw bad();
  r.size = std::stoi(t.substr(i, j - i));
  if (j < t.size()) {
    if (t[j] != 'r' || i == 0) throw bad();
    const std::string s = t.substr(j + 1);
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) throw bad();
    r.random_signs = true;
    r.seed = v;
  }
  validate_rotation(r, "rotation '" + t + "'");
  return r;
}

namespace {

// 1/sqrt(n) rounded once to float on the host and handed to both backends, so neither relies on
// its own sqrt.
float rotation_scale(int n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
}

Tensor rotate_cpu(const Tensor& x, const Rotation& r, float scale, int64_t outer, int64_t len,
                  int64_t inner, bool inverse, int threads) {
  Tensor out = Tensor::empty(DType::F32, x.shape());
  const float* src = x.ptr<float>();
  float* dst = out.mutable_ptr<float>();
  const int n = r.size;
  const int64_t blocks = len / n;
  const int64_t work = outer * blocks * inner;
  detail::parallel_for(work, 256, threads, nullptr, [&](int64_t lo, int64_t hi) {
    float v[rotation::kMaxBlock];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t in = w % inner;
      const int64_t b = (w / inner) % blocks;
      const int64_t o = w / (inner * blocks);
      const int64_t base = (o * len + b * n) * inner + in;
      for (int j = 0; j < n; ++j) v[j] = src[base + j * inner];
      rotation::rotate_block(v, n, scale, r.random_signs, r.seed, b * n, inverse);
      for (int j = 0; j < n; ++j) dst[base + j * inner] = v[j];
    }
  });
  return out;
}

}  // namespace

Tensor rotate(const Tensor& x, const Rotation& r, int axis, bool inverse, Device device) {
  validate_rotation(r);
  if (!r.enabled()) return x.to_f32();
  const int rank = x.rank();
  if (rank == 0) throw Error("rotation " + r.str() + ": cannot rotate a scalar");
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)
    throw Error("rotation " + r.str() + ": axis " + std::to_string(axis) +
                " is out of range for shape " + shape_str(x.shape()));
  const int64_t len = x.shape()[ax];
  if (len % r.size != 0)
    throw Error("rotation " + r.str() + ": axis " + std::to_string(ax) + " has length " +
                std::to_string(len) + ", not a multiple of the block size " +
                std::to_string(r.size) + " (shape " + shape_str(x.shape()) + ")");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (int i = ax + 1; i < rank; ++i) inner *= x.shape()[i];
  const Tensor f = x.dtype() == DType::F32 ? x : x.to_f32();
  const float scale = rotation_scale(r.size);
  // Any usable GPU takes a rotation asked of it (Auto included); a failure there falls back to
  // the CPU, which gives the same bits.
  exec::Executor& ex = exec::current();
  return ex.run<Tensor>(
      ex.place(exec::Work::Rotation, device, x.numel(), nullptr), exec::OnFailure::FallBack,
      [&] { return ex.backend().rotate(f, r, scale, outer, len, inner, inverse); },
      [&] { return rotate_cpu(f, r, scale, outer, len, inner, inverse, 0); });
}

namespace rotation {

CastResult cast_rotated(const Tensor& x, const DataType& d, const CastOptions& o) {
  CastOptions inner = o;
  inner.rotate = Rotation{};
  CastResult r = cast(rotate(x, o.rotate, o.axis, false, o.device), d, inner);
  r.options.rotate = o.rotate;
  r.shape = x.shape();
  if (r.mode == CastMode::Virtual) r.values = rotate(r.values, o.rotate, o.axis, true, o.device);
  return r;
}

Tensor upcast_rotated(const CastResult& r) {
  CastResult plain = r;
  plain.options.rotate = Rotation{};
  return rotate(upcast(plain), r.options.rotate, r.options.axis, true, r.options.device);
}

}  // namespace rotation

#ifndef CASTSCOPE_HAVE_CUDA
Tensor cuda::rotate_f32(const Tensor&, const Rotation&, float, int64_t, int64_t, int64_t, bool) {
  throw Error("GPU rotation: this build has no CUDA backend");
}
#endif

}  // namespace castscope
