// The cast API: one entry point for every datatype, mode and backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  // Quantization axis: tiles run along `axis` (negative counts from the end), a 2-D tile covers
  // (axis - 1, axis), channel scales reduce over it. With `flatten` the axes from `axis` to the
  // end act as one, so a conv weight [O, I, kh, kw] with axis 1 is cast as its view
  // [O, I*kh*kw]; the codes and scaling tensors of such a cast have the view's shape, its values
  // the input's. With `axis_auto` both come from the input's shape (default_axis) as the cast
  // starts, and the result records what was chosen. With `lead` as well (flatten is then set
  // too) the axes from 0 to `axis` merge into the reduction and the rest into the outputs: a
  // Keras kernel [kh, kw, Cin, Cout] with axis 2 is cast as its view [kh*kw*Cin, Cout] along
  // axis 0, a ConvTranspose weight [Cin, Cout/g, kh, kw] with axis 0 as [Cin, Cout/g*kh*kw].
  int axis = -1;
  bool flatten = false;
  bool axis_auto = false;
  bool lead = false;
  Device device = Device::Auto;
  // TCFP-8 scale selection: true picks the block scale at 3 sigma (NormalFloat-aware), false at
  // the block's absmax.
  bool tcfp_nf_aware = true;
  int threads = 0;  // 0: all hardware threads
  JobControl* job = nullptr;
  // Block Hadamard rotation along `axis` before the cast. Virtual values are rotated back;
  // actual / compressed results hold the rotated codes and upcast() rotates back.
  Rotation rotate;
  // Importance weights along the cast axis (llama.cpp's importance matrix, the `quant_weights`
  // of ggml's quantizers): one per element of a row, or k sets of them for k equal runs of rows
  // (stacked experts [E, out, in]: one set per expert). Null: none. Only ggml's block formats
  // use them (ggml::takes_importance); every other family casts as without.
  std::shared_ptr<const std::vector<float>> importance;
};

// A quantization-axis setting as users write it (CLI --axis, plan files, the app):
// "auto" (each tensor's resolved layout, see layout.hpp), "A" (axis A), "A:" (axes A to the
// end flattened into the reduction) or ":A" (axes 0 to A flattened into the reduction, the
// rest into the outputs; `lead`).
struct AxisSpec {
  bool automatic = false;
  int axis = -1;
  bool flatten = false;
  bool lead = false;  // with flatten: the leading axes 0..axis are the reduction
  std::string str() const;
  static AxisSpec parse(std::string_view s);  // throws Error naming the text
  static AxisSpec from(const CastOptions& o) { return {o.axis_auto, o.axis, o.flatten, o.lead}; }
  void apply(CastOptions& o) const {
    o.axis_auto = automatic;
    o.axis = axis;
    o.flatten = flatten || lead;
    o.lead = lead;
  }
  // Spelled out: the CUDA sources that include this header compile as C++17.
  bool operator==(const AxisSpec& o) const {
    return automatic == o.automatic && axis == o.axis && flatten == o.flatten && lead == o.lead;
  }
  bool operator!=(const AxisSpec& o) const { return !(*this == o); }
};

// The reduction axis the inference stacks quantize over, from the shape alone: a weight of rank
// 4 or 5 is a Conv2d / Conv3d weight [O, I/groups, k...] (PyTorch and ONNX layouts) and reduces
// over I*k... (axis 1, flattened); everything else over its last axis (a linear weight [out, in],
// stacked experts [E, out, in], a 1-D vector). A rank-3 conv1d weight is not told apart from
// stacked experts and takes the last axis unless set explicitly.
AxisSpec default_axis(const Shape& shape);
// `o` with axis_auto resolved for `shape` (by default_axis: callers that know the tensor's
// layout resolve it first, see layout.hpp), a negative flattened axis made non-negative and
// `flatten` dropped where it merges nothing (the axis is the last; a leading axis 0 of a rank-2
// tensor becomes plain axis 0). Throws Error for an axis out of range.
CastOptions resolve_axis(const CastOptions& o, const Shape& shape);
// The shape a cast of `shape` under (resolved) `o` works on: with flatten, the axes from `axis`
// on multiplied into one last axis; with lead, [prod(shape[0..axis]), prod(shape[axis+1..])];
// otherwise `shape` itself.
Shape cast_view_shape(const Shape& shape, const CastOptions& o);
// `o` for the flattened view itself: its last axis (its first with lead), nothing left to
// flatten or resolve.
CastOptions view_options(const CastOptions& o);
// The axis in use on `shape` for display: "-1:4096", "1..3:147" (axes 1 to 3 flattened, 147
// values per row), "0..2:576" (with lead: axes 0 to 2 flattened).
std::string describe_axis(const CastOptions& o, const Shape& shape);
// Length of the (possibly flattened) quantization axis of `shape`.
int64_t axis_length(const CastOptions& o, const Shape& shape);

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
// A flattened result as the plain cast of its view: shape the view's, axis the view's last,
// flatten off (values reshaped to the view). Other results are returned unchanged.
CastResult as_view(const CastResult& result);
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

// GPU start-up off the critical path. Creating the CUDA context takes a few hundred
// milliseconds, more than the CPU needs for a tensor of millions of values, so Device::Auto runs
// small work on the CPU and a caller that expects GPU work (a large file, the app) starts the
// context on a background thread while it loads. All of these are cheap and never throw.
//
// Starts the driver and context on a background thread (once per process; later calls do
// nothing). Without a CUDA build it only records that no GPU is there.
void start_gpu_in_background();
// True when the background start was asked for and has not finished.
bool gpu_starting();
// True when a context is known to be up: the background start finished with a usable GPU, or
// an earlier GPU call made one.
bool gpu_running();
// Waits for a background start, if one runs (the app and the CLI call it before exit).
void finish_gpu_start();
// The fewest elements for which Device::Auto sends a cast of `dtype` to the GPU: below it the
// CPU finishes first (docs/performance.md, "Start-up"). `running` says whether the context is up
// already (then only the transfers count against the GPU). CASTSCOPE_GPU_MIN_ELEMENTS overrides
// both thresholds.
int64_t auto_gpu_min_elements(const DataType& dtype, bool running);
// Where Device::Auto runs a cast of n elements of dtype now: CPU or CUDA (never Auto).
Device resolve_auto_device(int64_t n, const DataType& dtype);
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

// Cast options as users write them (CLI flags, Python keyword arguments): the one parser that
// turns text into a CastOptions. An empty field keeps the value of `base`. An error names the
// option (`prefix` + field name, "--round" for the CLI, "round" for Python) and the bad text.
struct CastOptionText {
  std::string mode, round, scale_mode, overflow, axis, rotate, device;
};
CastOptions parse_cast_options(const CastOptionText& text, const CastOptions& base = {},
                               std::string_view prefix = "--");

}  // namespace castscope
