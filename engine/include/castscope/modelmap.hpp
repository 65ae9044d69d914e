// The model map: every quantizable tensor of a model cast to every candidate datatype, one
// metric per cell, computed by streaming the model one tensor at a time (docs/gui.md, "Model
// map"). The CLI's `map` command and the app's model map panel both print this grid.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/export.hpp"
#include "castscope/io.hpp"
#include "castscope/linear_error.hpp"
#include "castscope/method.hpp"
#include "castscope/metrics.hpp"

namespace castscope {

// OutputSNR: the matmul output SNR of a row with activations (MapOptions::activations).
enum class MapMetric { SNR, RelErr, MaxErr, Clipped, OutputSNR };
MapMetric parse_map_metric(std::string_view s);  // snr | relerr | maxerr | clipped | outsnr
const char* to_string(MapMetric m);
bool higher_is_better(MapMetric m);
// The metric of one cell: SNR in dB, relative error ||q - x|| / ||x||, max |q - x|, clipped %.
double metric_value(const Stats& s, MapMetric m);

struct MapOptions {
  std::vector<std::string> dtypes;  // the columns, as given
  CastOptions cast;                 // round, scale mode, axis, device and rotation of every cell
  std::string filter;               // regular expression over names ("" = all)
  bool include_embeddings = false;  // token / position embeddings are left out unless asked
  bool include_1d = false;          // norms and biases are left out unless asked
  // Activations [tokens, in]: every 2-D row whose last axis is `in` also gets the output error
  // of y = x W^T with W cast to the column and x cast to act_dtype (empty: to the column too).
  Tensor activations;
  std::optional<DataType> act_dtype;
  bool act_keep = false;    // activations stay float32
  int64_t max_tokens = 64;  // rows of the activations used (0: all)
  // Quantization methods: each datatype gets one column per method, in this order ("D" for rtn,
  // "D@gptq" for the others); empty: rtn only.
  std::vector<MethodOptions> methods;
  // Calibration inputs [tokens, in] of a weight by name (an empty tensor where there are none):
  // what gptq / awq need, and every column's output error on them.
  std::function<Tensor(const std::string&)> calib;
};

struct MapCell {
  Stats stats;
  std::string error;         // the cast failed (e.g. a tile longer than the axis); stats unset
  bool has_output = false;   // activations given and the row's shape fits them
  double out_snr_db = 0;     // matmul output SNR
  double out_rel_err = 0;    // matmul output ||yq - y|| / ||y||
  std::string out_product;   // which product of the cast operands ran (LinearError::product)
  bool has_calib = false;    // the weight has calibration inputs (MapOptions::calib)
  double calib_rel_err = 0;  // ||X W^T - X Q^T|| / ||X W^T|| on them
  // The cell's exact storage on this tensor (storage_bits on its resolved axis); 0 where the
  // datatype cannot lay out along that axis (error says why).
  uint64_t storage_bits = 0;
  double bits_per_value(int64_t numel) const {
    return numel > 0 ? static_cast<double>(storage_bits) / static_cast<double>(numel) : 0.0;
  }
};
// The cell's value of a metric: NaN for a failed cast, or for OutputSNR without activations.
double cell_value(const MapCell& c, MapMetric m);

struct MapRow {
  std::string name;
  std::string group;  // "model.layers.3" (the layer), "" for tensors outside numbered layers
  std::string block;  // "self_attn", "mlp", ... (the component after the layer)
  std::string stored_dtype;
  Shape shape;
  int64_t numel = 0;
  uint64_t stored_bytes = 0;
  ResolvedLayout layout;    // the tensor's resolved layout (io::TensorInfo::layout)
  std::string axis;         // the axis its cells were cast on (describe_axis)
  int64_t axis_length = 0;  // that axis's length: the channel bits per value are counted on
  // The channel length bits per value are counted on (the last axis where none was resolved).
  int64_t channel() const {
    return axis_length > 0 ? axis_length : shape.empty() ? 1 : shape.back();
  }
  std::vector<MapCell> cells;  // one per column
};

struct ModelMap {
  std::vector<DataType> dtypes;
  std::vector<std::string> columns;  // the datatype strings as given (D@method for methods)
  std::vector<Method> methods;       // each column's method
  // Bits per value of each column on the longest resolved row of the map; a tensor's own
  // figure is its cell's storage_bits.
  std::vector<double> bits;
  std::vector<double> nominal_bits;  // each column's nominal bits per value (no row length)
  Rotation rotate;                   // the rotation every cell was cast with
  std::string backend;               // "cuda" (tensor kept on the GPU across its cells) or "cpu"
  std::vector<MapRow> rows;
  std::vector<std::pair<std::string, std::string>> skipped;  // name, reason
  int64_t values = 0;                                        // elements swept (all rows)
  double seconds = 0;
  // Operand copies to the GPU for the output errors with activations: the activations once,
  // then each weight once for all its columns (0 on the CPU).
  uint64_t linear_uploads = 0;
  // Each column's method with its options (plan_from_map writes them into its rules).
  std::vector<MethodOptions> method_options;
};

// Whether the map has a row for this tensor: float storage, at least 2-D, not an embedding.
bool map_considers(const io::TensorInfo& info, const MapOptions& o);
bool is_embedding_tensor(const std::string& name);
// Layer ("model.layers.3") and block ("mlp") of a tensor name.
void layer_and_block(const std::string& name, std::string& layer, std::string& block);

// Loads each tensor in turn (released after use, so memory stays bounded by one tensor and its
// casts), casts it to every column and reports progress by bytes. With a GPU (and no rotation)
// the tensor is uploaded once and every cell's cast and metrics run on the device (casts
// bit-identical to the CPU, sums up to summation order); otherwise cast() picks the device.
// on_row runs after each row (from the calling thread). Throws Error for a bad datatype string
// or a model that cannot be read, Cancelled when job->cancel is set.
ModelMap sweep_model(const io::Model& model, const MapOptions& o, JobControl* job = nullptr,
                     const std::function<void(const MapRow&)>& on_row = {});

// Size of a per-row choice of columns (-1: kept as stored), as a plan would export it.
struct MapTotals {
  int64_t values = 0;      // elements of the rows
  double bits = 0;         // total bits of the cast rows plus stored bits of kept rows
  double stored_bits = 0;  // the same rows as stored
  double avg_bits() const { return values ? bits / static_cast<double>(values) : 0.0; }
};
MapTotals map_totals(const ModelMap& map, const std::vector<int>& choice);
// A plan with one exact-name rule per chosen row (rotation recorded when given, and the column's
// method with its options for a method column), default keep.
ExportPlan plan_from_map(const ModelMap& map, const std::vector<int>& choice,
                         const Rotation& rotate = {});

}  // namespace castscope
