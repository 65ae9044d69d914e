// The cast API: one entry point for every datatype, mode and backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "castscope/datatype.hpp"
#include "castscope/rotation.hpp"
#include "castscope/tensor.hpp"

namespace castscope {

using scalar::Overflow;
using scalar::Round;
using scalar::ScaleMode;

enum class CastMode { Virtual, Actual, Compress };
enum class Device { Auto, CPU, CUDA };

// Progress and cancellation for long work. The engine calls report() now and then (fraction in
// [0, 1]) and throws Cancelled once cancel is set.
struct JobControl {
  std::atomic<bool> cancel{false};
  std::atomic<double> progress{0.0};
  std::function<void(double)> on_progress;  // optional; called from worker threads
  void report(double fraction);
  void check() const;  // throws Cancelled
};

struct CastOptions {
  CastMode mode = CastMode::Virtual;
  Round round = Round::Even;
  ScaleMode scale_mode = ScaleMode::Floor;
  Overflow overflow = Overflow::Saturate;
  uint64_t seed = 0;
  // Tile axis of a 1-D tile (negative counts from the end). A 2-D tile covers axes
  // (axis - 1, axis). Channel scales use it as the channel's reduction axis.
  int axis = -1;
  Device device = Device::Auto;
  // TCFP-8 scale selection: true picks the block scale at 3 sigma (NormalFloat-aware), false at
  // the block's absmax.
  bool tcfp_nf_aware = true;
  int threads = 0;  // 0: all hardware threads
  JobControl* job = nullptr;
  // Block Hadamard rotation along `axis` before the cast. Virtual values are rotated back;
  // actual / compressed results hold the rotated codes and upcast() rotates back.
  Rotation rotate;
};

struct CastCounts {
  int64_t clipped = 0;    // finite inputs that saturated (or clamped at 0 for uint)
  int64_t nonfinite = 0;  // NaN / Inf inputs
  int64_t pruned = 0;     // values removed by N:M sparsity
};

// Result of a cast. Virtual: `values` only. Actual: codes plus the scaling tensors of
// tensorcast-shapes.md in their unpacked shapes. Compress: the same, packed (docs/formats.md).
struct CastResult {
  DataType dtype;
  CastOptions options;
  Shape shape;  // the input's shape
  CastMode mode = CastMode::Virtual;
  std::string backend = "cpu";
  Tensor values;          // virtual: float32, input shape
  Tensor codes;           // element codes
  Tensor scale;           // per tile / channel / tensor
  Tensor zero;            // zero points (uint data)
  Tensor tenscale;        // tensor scale of a multiscale datatype (one element)
  Tensor meta;            // microexponent bits per subtile (0/1; packed in compress mode)
  Tensor mask;            // N:M sparsity keep-mask (bool; packed in compress mode)
  Tensor residual;        // TCFP-12 / TCFP-16 second term
  Tensor residual_scale;  // its block scales
  CastCounts counts;
};

// Casts x (F32 / F16 / BF16 / F64, any rank) to dtype. Throws Error for bad input (empty tensor,
// axis out of range, a tile larger than its axis, unsupported dtype).
CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& options = {});
// Values (float32, input shape) that an actual or compressed result stands for. For every
// datatype, upcast(cast(x, d, {Compress})) equals cast(x, d, {Virtual}).values bit for bit.
Tensor upcast(const CastResult& result);
// Actual <-> compressed layouts (lossless both ways).
CastResult pack(const CastResult& actual);
CastResult unpack(const CastResult& packed);

// The backend that Device::Auto resolves to on this machine, and why.
struct BackendInfo {
  bool cuda_built = false;
  bool cuda_available = false;
  std::string device_name;  // GPU name when available
  std::string reason;       // why CUDA is not used, when it is not
};
BackendInfo backend_info();
// Where one-time notices go (e.g. "no usable GPU; using the CPU backend"); default: stderr.
void set_notice_handler(std::function<void(const std::string&)> handler);

const char* to_string(Round r);
const char* to_string(ScaleMode m);
const char* to_string(Overflow o);
const char* to_string(CastMode m);
Round parse_round(std::string_view s);  // even | away | nearest | zero | stochastic
ScaleMode parse_scale_mode(
    std::string_view s);  // floor|max, ceil, midmax|auto, option3|even, topbinade
Overflow parse_overflow(std::string_view s);   // saturate | ieee
CastMode parse_cast_mode(std::string_view s);  // virtual | actual | compress
Device parse_device(std::string_view s);       // auto | cpu | cuda

}  // namespace castscope
