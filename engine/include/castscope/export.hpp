// Writing checkpoints: a general safetensors writer (in memory or streamed tensor by tensor),
// per-layer export plans, and the exporters of docs/export-formats.md (CastScope packed, gpt-oss
// MXFP4, compressed-tensors, GGUF). Every exporter writes a temporary file, reads it back and
// verifies it, and only then renames it into place; a failure or a cancel leaves no file at the
// target and whatever was there before untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/imatrix.hpp"
#include "castscope/io.hpp"
#include "castscope/method.hpp"
#include "castscope/tensor.hpp"

namespace castscope {

// A plain safetensors file (tensors in the given order, 8-byte aligned header). Atomic.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      JobControl* job = nullptr);

// Streams tensors into a safetensors file with bounded memory: each add() appends the tensor's
// bytes to an anonymous spill file beside the target, finish() writes header + data through
// io::write_atomically, re-reads the result and checks every tensor's header entry and CRC-32,
// then renames it into place. Destroying an unfinished writer leaves nothing behind.
class SafetensorsStreamWriter {
 public:
  explicit SafetensorsStreamWriter(std::string path);
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  void add(const std::string& name, const Tensor& t);
  bool contains(const std::string& name) const;
  uint64_t data_bytes() const { return offset_; }
  void finish(const std::map<std::string, std::string>& metadata, JobControl* job = nullptr);

 private:
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
    uint32_t crc;
  };
  std::string path_;
  int spill_fd_ = -1;
  uint64_t offset_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
};

// ---------------------------------------------------------------------------------------------
// Per-layer plans (docs/export-formats.md, "Plan files").

struct PlanRule {
  std::string pattern;  // glob (whole name), or "re:REGEX" (searched anywhere in the name)
  std::string dtype;    // datatype string, or "keep"; empty for an axis-only rule
  int rank = -1;        // only tensors of this rank (-1: any)
  // "weights": true: only tensors of rank 2 or more that are not embeddings (by their resolved
  // layout): every weight a matrix product or convolution uses.
  bool weights = false;
  Rotation rotate;  // block Hadamard rotation before the cast (none: "rotate" absent)
  // Quantization axis ("axis": "auto", an integer, "A:" or ":A" flattened); absent: the export's.
  std::optional<AxisSpec> axis;
  // A rule without "dtype": it overrides the axis (the layout) of the tensors it matches, ahead
  // of every datatype rule's axis, and decides no datatype (the next rules do).
  bool axis_only = false;
  // The quantization method ("method" and "method_options"); absent: rtn, the plain cast.
  std::optional<MethodOptions> method;
  // Filled by the loader.
  std::optional<DataType> target;  // empty: keep
  std::shared_ptr<std::regex> re;
};

// What the budget planner recorded with a plan (docs/planning.md): the keys "budget" and
// "predicted" of a plan file; other plans have neither.
struct PlanBudget {
  double bits_per_weight = 0;  // the budget, over the planned tensors' values
  uint64_t budget_bits = 0;
  int64_t values = 0;          // elements of the planned tensors
  uint64_t plan_bits = 0;      // the plan's storage of them (storage_bits)
  double predicted_error = 0;  // the sum the planner minimized
  std::string predictor;       // "activations", "weights" or "mixed"
};

struct ExportPlan {
  std::string source = "<plan>";          // file name, for messages
  std::optional<DataType> default_dtype;  // empty: keep
  std::string default_text = "keep";
  std::vector<PlanRule> rules;
  std::optional<PlanBudget> budget;

  // The datatype a tensor is cast to; empty: kept as stored. Non-float tensors are always kept.
  // The first matching rule wins; unmatched weights (rank 2 or more, not embeddings by their
  // resolved layout) get the default, unmatched 1-D tensors and embeddings are kept.
  std::optional<DataType> dtype_for(const io::TensorInfo& info) const;
  // The rotation of the matching rule (none for the default and for kept tensors).
  Rotation rotation_for(const io::TensorInfo& info) const;
  // The axis setting for the tensor: the first matching axis-only rule's, else the matching
  // datatype rule's (empty: none given, the export's own applies).
  std::optional<AxisSpec> axis_for(const io::TensorInfo& info) const;
  // The method of the matching rule (rtn for the default, kept tensors and rules without one).
  MethodOptions method_for(const io::TensorInfo& info) const;
  // Index of the datatype rule that matches (-1: none; axis-only rules never match here). The
  // name-and-rank form takes a "weights" rule for any tensor of rank 2 or more (it cannot tell
  // embeddings).
  int match(const std::string& name, int rank) const;
  int match(const io::TensorInfo& info) const;
};

// Parse plan JSON text; `source` names the file in every error message.
ExportPlan parse_plan(const std::string& json_text, const std::string& source = "<plan>");
ExportPlan load_plan(const std::string& path);
std::string plan_to_json(const ExportPlan& plan);  // pretty-printed; parse_plan gives it back
void save_plan(const std::string& path, const ExportPlan& plan);
// The --dtype shortcut: every float weight of rank 2 or more (embeddings aside) to `dtype`, cast
// along its resolved layout; 1-D tensors and embeddings kept.
ExportPlan plan_for_dtype(const std::string& dtype);
// Axis-only rules from "PATTERN=AXIS" texts (the CLI's --axis-for), in the order given; Error
// naming a malformed text.
ExportPlan axis_override_plan(const std::vector<std::string>& specs);
// The plan with the axis-only rules of `overrides` put first.
ExportPlan with_axis_overrides(const ExportPlan& plan, const ExportPlan& overrides);
// `model` with the layout of every tensor an axis-only rule of `plan` names (with an axis other
// than auto) replaced by that axis, not guessed, its reason naming the rule: every consumer
// (inspect, report, map, export) then reads the override as the tensor's layout. The model
// itself when no rule applies; Error naming a tensor whose rank the axis does not fit.
std::unique_ptr<io::Model> with_layout_overrides(std::unique_ptr<io::Model> model,
                                                 const ExportPlan& plan);
// The same over a shared model (the app keeps the file's model and wraps it anew as the plan's
// overrides change).
std::shared_ptr<const io::Model> with_layout_overrides(std::shared_ptr<const io::Model> model,
                                                       const ExportPlan& plan);
// Glob match of the whole name: '*' any run of characters (dots included), '?' one character,
// [abc] / [a-z] / [!a] character classes.
bool glob_match(std::string_view pattern, std::string_view name);

// ---------------------------------------------------------------------------------------------
// Exporters.

enum class Layout { Native, GptOss, CompressedTensors, GGUF };
Layout parse_layout(std::string_view s);  // native | gpt-oss | compressed-tensors | gguf
const char* to_string(Layout l);

// Why `layout` cannot hold tensor `info` cast to `d` along its axis as that layout's exporter
// resolves it (`cast` gives the axis, "auto" for each tensor's resolved layout), or "" where it
// can: the datatype must be one the layout stores, along the axis and block multiple its readers
// take. The budget planner's and auto-assignment's restriction to a target layout
// (BudgetPlanOptions::layout), and the check of a plan made for none.
std::string layout_refusal(Layout layout, const DataType& d, const io::TensorInfo& info,
                           const CastOptions& cast);
// The layouts that hold every (tensor, datatype) of a plan; per refusing layout, the first
// tensors it refuses with the reason.
struct PlanFit {
  std::vector<Layout> holds;
  std::vector<std::pair<Layout, std::vector<std::pair<std::string, std::string>>>> refused;
};
PlanFit plan_fit(const io::Model& model, const ExportPlan& plan, const CastOptions& cast);

struct ExportOptions {
  Layout layout = Layout::Native;
  CastOptions cast;  // round, scale mode, seed, device, threads (mode and job are set per tensor)
  // compressed-tensors: where config.json goes ("" = beside the output file). An existing
  // config.json is kept and gains / replaces its "quantization_config".
  std::string config_path;
  std::map<std::string, std::string> metadata;  // extra __metadata__ / GGUF string keys
  // Calibration inputs [tokens, in] of a weight by name (an empty tensor where there are none):
  // what a plan rule's gptq / awq method needs.
  std::function<Tensor(const std::string&)> calib;
  // Model-directory exports (filled by export_model): `out` is then a directory, each source
  // file maps to the shard of that name in it, and `index_name` ("" = none) lists the shards.
  std::map<std::string, std::string> shards;
  std::string index_name;
  // llama.cpp's importance matrix (io::read_imatrix), given to ggml's quantizers tensor by tensor
  // as llama-quantize --imatrix gives it; `imatrix_file` is recorded in a GGUF export's
  // quantize.imatrix.* keys as llama-quantize records it.
  std::shared_ptr<const io::Imatrix> imatrix;
  std::string imatrix_file;
  // GGUF: general.file_type by llama.cpp's name of the mix ("Q4_K_S", "Q4_K_M", "IQ4_XS" ...);
  // empty: named after the file's dominant type (docs/export-formats.md, "GGUF").
  std::string gguf_file_type;
};

struct ExportedTensor {
  std::string name;
  std::string dtype;  // datatype string, or "keep:<stored dtype>"
  Shape shape;
  uint64_t bytes_in = 0;   // stored size in the source
  uint64_t bytes_out = 0;  // bytes written for it (all parts)
  std::string axis;        // cast tensors: the quantization axis in use (describe_axis)
};

struct ExportReport {
  std::vector<ExportedTensor> tensors;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<std::string> files;  // files written (output, config.json)
  std::string directory;           // the model directory written ("" for a single file)
};

// Streams `model` tensor by tensor into `out` with the plan's datatypes: at most one source
// tensor and its cast are in memory at a time. A model read from a directory or a sharded
// *.index.json, exported to a safetensors layout at a path that does not exist yet, becomes a
// model directory (docs/export-formats.md, "Model directories"): the source's other files
// copied, config.json merged, one shard per source shard and an index like the source's. It is
// built under a staged name and renamed into place when complete. Throws Error (naming tensor and
// file) for a plan the layout cannot express, Cancelled when job->cancel is set.
ExportReport export_model(const io::Model& model, const std::string& out, const ExportPlan& plan,
                          const ExportOptions& options, JobControl* job = nullptr);

// In-memory CastScope packed export: io::save_packed, then io::load_packed to verify that every
// tensor reads back with identical codes and scaling tensors.
void export_packed(const std::string& path, const std::vector<io::PackedTensor>& tensors,
                   const std::vector<std::pair<std::string, std::string>>& extra_metadata = {});

// A Model over tensors held in memory (tests, the GUI's current tensors, single .npy files).
class MemoryModel : public io::Model {
 public:
  explicit MemoryModel(std::string path = "<memory>") { path_ = std::move(path); }
  void add(const std::string& name, const Tensor& t);
  const std::vector<io::TensorInfo>& tensors() const override { return infos_; }
  Tensor load(const std::string& name) const override;
  Tensor load_raw(const std::string& name) const override;
  std::string format() const override { return "memory"; }

 private:
  std::vector<io::TensorInfo> infos_;
  std::map<std::string, Tensor> data_;
};

namespace exportdetail {
// Shared by the exporters (export_*.cpp).
DType stored_dtype(const io::TensorInfo& info);  // F32 when the stored type has no DType
// float32 values back to a storage dtype (exact for values that came from it).
Tensor to_storage(const Tensor& f32, DType d);
uint32_t crc32_of(const void* data, size_t n, uint32_t crc = 0);
// A tensor the plan keeps: written in its stored dtype; fills et.dtype and et.bytes_out.
// The files one export writes: a single safetensors file, or the shards of a model directory
// (ExportOptions::shards), each tensor's parts going to the shard of its source file.
class OutputFiles {
 public:
  OutputFiles(std::string out, const ExportOptions& o);
  void route(const io::TensorInfo& info);  // the shard that the following add() calls fill
  void add(const std::string& name, const Tensor& t);
  // Finishes every shard and the index (verified, renamed) and lists them in rep.files.
  void finish(const std::map<std::string, std::string>& metadata, JobControl* job,
              ExportReport& rep);

 private:
  std::string out_;
  const ExportOptions& opt_;
  std::vector<std::pair<std::string, std::unique_ptr<SafetensorsStreamWriter>>> shards_;
  std::map<std::string, std::string> weight_map_;
  size_t cur_ = 0;
};
void keep_tensor(OutputFiles& w, const io::TensorInfo& info, const Tensor& x, ExportedTensor& et);
// Positional reads of a file being verified; a short read is an Error naming the file.
class VerifyReader {
 public:
  explicit VerifyReader(std::string path);
  ~VerifyReader();
  VerifyReader(const VerifyReader&) = delete;
  VerifyReader& operator=(const VerifyReader&) = delete;
  void read_at(void* dst, size_t n, uint64_t off) const;

 private:
  std::string path_;
  int fd_ = -1;
};
// write_atomically to a staged name, verify(staged) and rename it to path; unlinks the staged
// file on any failure.
void commit_verified(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write,
    const std::function<void(const std::string&)>& verify);
// Progress of one cast mapped onto [base, base + width] of the outer job, cancel forwarded.
struct SubJob {
  JobControl inner;
  SubJob(JobControl* outer, double base, double width);
};
// A tensor to write: one the plan keeps (`kept`) in its stored dtype where the reader can give it
// (exact bits, integers beyond 2^24), everything else as float32.
Tensor load_for_export(const io::Model& model, const std::string& name, bool kept);
// Runs fn for one tensor of the model: its errors, a failed allocation too, are re-thrown naming
// the tensor and the model file; a cancel passes through as it is.
void with_tensor_context(const io::Model& model, const std::string& name,
                         const std::function<void()>& fn);
// Loads each tensor of the model in turn (with its plan datatype) and hands it to fn with a
// sub-job for its cast; errors are re-thrown naming the tensor and the model file.
using TensorFn = std::function<void(const io::TensorInfo&, const std::optional<DataType>&,
                                    const Tensor&, JobControl*)>;
void for_each_tensor(const io::Model& model, const ExportPlan& plan, JobControl* job,
                     const TensorFn& fn);
// for_each_tensor for the exporters that fill OutputFiles: each tensor's report row is started
// and its shard routed, a tensor the plan casts goes to `cast`, one it keeps to `keep`
// (keep_tensor when empty), and the row is listed in rep.
using CastFn = std::function<void(const io::TensorInfo&, const DataType&, const Tensor&,
                                  JobControl*, ExportedTensor&)>;
using KeepFn =
    std::function<void(const io::TensorInfo&, const Tensor&, JobControl*, ExportedTensor&)>;
void for_each_routed(const io::Model& model, const ExportPlan& plan, JobControl* job,
                     OutputFiles& w, ExportReport& rep, const CastFn& cast,
                     const KeepFn& keep = {});
// Cast options for one tensor of an export.
CastOptions cast_options(const ExportOptions& o, CastMode mode, JobControl* sub);
// The same with the plan rule's axis (else the export's) resolved for the tensor's shape. The
// gguf layout resolves "auto" to the last axis (ggml quantizes rows, whatever the tensor), the
// gpt-oss layout to axis -2 for rank-3 experts [E, in, out] (transformers' GptOss layout).
CastOptions cast_options(const ExportOptions& o, CastMode mode, JobControl* sub,
                         const ExportPlan& plan, const io::TensorInfo& info);
// The cast of a tensor the plan maps to `d` with the method of its rule (plain cast for rtn),
// calibration from o.calib by the tensor's name, packed when co.mode is Compress. Where the layout
// can store awq's pre-quant scale it passes `pre_quant_scale` to receive it; without it an awq rule
// is refused by name.
CastResult method_cast(const io::TensorInfo& info, const DataType& d, const Tensor& x,
                       const CastOptions& co, const ExportPlan& plan, const ExportOptions& o,
                       Tensor* pre_quant_scale = nullptr);
// The compressed-tensors format that holds d ("nvfp4-pack-quantized", ...), "" for none.
std::string ctensors_format(const DataType& d);
bool is_mxfp4(const DataType& d);  // e2m1[fnuz] + e8m0 scale per 32, no extras
bool axis_is_last(const CastOptions& o, const Shape& s);  // resolved, and not flattened
Tensor pack_e2m1(const Tensor& codes, bool fnuz);         // two codes per byte, element 2i low
ExportReport export_native(const io::Model&, const std::string&, const ExportPlan&,
                           const ExportOptions&, JobControl*);
ExportReport export_gpt_oss(const io::Model&, const std::string&, const ExportPlan&,
                            const ExportOptions&, JobControl*);
ExportReport export_compressed_tensors(const io::Model&, const std::string&, const ExportPlan&,
                                       const ExportOptions&, JobControl*);
ExportReport export_gguf(const io::Model&, const std::string&, const ExportPlan&,
                         const ExportOptions&, JobControl*);
// One layout's exporter into `out` as ExportOptions says (export_model without the directory
// handling).
ExportReport export_layout(const io::Model&, const std::string&, const ExportPlan&,
                           const ExportOptions&, JobControl*);
}  // namespace exportdetail

}  // namespace castscope
