// Reading tensors and models from files, and writing results. Readers memory-map and parse
// headers only until a tensor is used; writers go through a temporary file that is renamed into
// place when complete, so an interrupted write never leaves a partial file at the target.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/layout.hpp"
#include "castscope/tensor.hpp"

namespace castscope::io {

// .npy (version 1/2/3 headers; little- or big-endian numeric dtypes, C or Fortran order).
Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);

// Writes `bytes` to path atomically: a temporary file beside it, fsync, rename. `write` gets a
// callback to append data; throwing from it (or a full disk) leaves no file at `path`.
void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write);
// The same, for a file staged on its way to `shown` (the path the user gave): errors name that.
void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write,
    const std::string& shown);
// "cannot create 'PATH': why" for an errno from creating a file at or beside PATH; a missing
// directory is named as such.
std::string cannot_create(const std::string& path, int err);

// An empty file of a fresh name in the system's temporary directory ("STEM-XXXXXX"), for a child
// process to write into; removed when this goes out of scope. Throws Error when it cannot be made.
class TempFile {
 public:
  explicit TempFile(const std::string& stem);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// How a quantized checkpoint stores one logical weight: codes plus companion tensors (scales,
// zero points, g_idx, global scales, packed shapes) that the reader folded into it
// (engine/src/io/quantized/, docs/io-formats.md "Quantized checkpoints").
struct StoredQuant {
  std::string convention;  // "fp8-block", "compressed-tensors nvfp4-pack-quantized", ...
  std::string datatype;    // the CastScope datatype it is stored as; "" when the grammar has none
  std::string format;      // the stored format in words (always set for a quantized weight)
  std::vector<std::string> parts;  // the file's tensors that make it up, codes first
  uint64_t stored_bytes = 0;       // bytes of all parts in the file
  double bits_per_weight = 0;      // 8 * stored_bytes / values
  bool empty() const { return convention.empty(); }
};

// One entry of a model's table of contents: read from headers only.
struct TensorInfo {
  std::string name;
  // As stored: "BF16", "F8_E4M3", "Q4_0", "float32", ...; for a quantized weight (`stored` set)
  // the dtype its producer dequantizes it to, which load() gives as float32.
  std::string dtype;
  Shape shape;
  uint64_t nbytes = 0;  // stored size
  std::string file;     // file that holds it (models may span several files)
  // Its quantization layout, resolved once by open_model from what the file says (the ONNX
  // graph, config.json, Keras / TF names, GGUF rows); every consumer casts along it
  // (options_for, cast_options_for).
  ResolvedLayout layout;
  StoredQuant stored;  // empty unless the checkpoint stores this weight quantized
};

// `o` for tensor `t`: an automatic axis becomes the tensor's resolved layout, an explicit one
// (command line, plan rule) is kept; then resolved for its shape.
inline CastOptions cast_options_for(const CastOptions& o, const TensorInfo& t) {
  return options_for(o, t.shape, t.layout);
}

// A model (checkpoint) opened from a file, a directory, or a *.safetensors.index.json. Opening
// and listing read headers only; load() maps the data and converts one tensor to float32.
class Model {
 public:
  virtual ~Model() = default;
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  virtual Tensor load(const std::string& name) const = 0;  // float32, the stored shape
  virtual std::string format() const = 0;                  // "safetensors", "npz", "gguf", ...
  // The tensor in its stored dtype (no conversion; borrowed from the file map where possible).
  // Throws Error for storage that has no DType (GGUF block formats, ONNX fnuz floats).
  virtual Tensor load_raw(const std::string& name) const;
  const std::string& path() const { return path_; }
  const TensorInfo* find(const std::string& name) const {
    for (const TensorInfo& t : tensors())
      if (t.name == name) return &t;
    return nullptr;
  }

 protected:
  std::string path_;
};

// "Does CastScope reproduce this file?": the dequantized values of quantized weight `name`
// re-quantized to its stored datatype with round-to-nearest (ties to even) along its layout, and
// the fraction that come out bit for bit identical (1 for a file CastScope's quantizer would
// write; GPTQ / AWQ codes chosen by error feedback do not reproduce). Throws Error for a weight
// that is not stored quantized or whose stored format has no CastScope datatype.
struct Reproduction {
  std::string datatype;
  int64_t values = 0, identical = 0;
  double fraction() const { return values ? static_cast<double>(identical) / values : 1.0; }
};
Reproduction reproduce_stored(const Model& model, const std::string& name);

// Drops the resident pages of a tensor that is done with (memory-mapped readers), so streaming
// over a large checkpoint keeps its resident memory bounded. A hint: the data stays readable.
void release_pages(const Model& model, const std::string& name);

// Picks the reader from the file's contents / extension. Throws Error naming the file.
std::unique_ptr<Model> open_model(const std::string& path);

// `model`'s data under another list of tensors: some of them (a sweep of a few rows again), or
// the same ones with other layouts (a plan's overrides). Loads go to `model`.
std::unique_ptr<Model> relist(std::shared_ptr<const Model> model, std::vector<TensorInfo> infos);

// Whether a TensorInfo::dtype string names floating-point storage (safetensors "BF16", numpy
// "float16", GGUF "Q4_0" / "MXFP4", ONNX "FLOAT", ...): the tensors worth casting.
bool is_float_storage(const std::string& stored_dtype);

// safetensors dtype names ("F32", "BF16", "F8_E4M3", "U8", "BOOL", ...).
const char* safetensors_dtype(DType d);
DType parse_safetensors_dtype(const std::string& s);  // throws Error for unknown names

// CastScope packed safetensors (docs/export-formats.md): per tensor NAME the codes as NAME and
// the scaling tensors as NAME.scale / .zero / .tenscale / .meta / .mask / .residual /
// .residual_scale, with the datatype string, original shape and cast options in __metadata__.
struct PackedTensor {
  std::string name;
  CastResult result;  // Actual or Compress mode
};
// The parts of a packed tensor and their key suffixes ("" is the codes), in file order: the one
// definition of the packed key layout, shared by every writer and reader of it.
struct PackedPart {
  const char* suffix;
  Tensor CastResult::*member;
};
const std::vector<PackedPart>& packed_parts();
// The __metadata__ entries of packed tensor NAME holding result r (datatype, shape, mode, cast
// options, a generic codebook's tables), shared by every packed writer.
std::vector<std::pair<std::string, std::string>> packed_tensor_metadata(const std::string& name,
                                                                        const CastResult& r);
// The castscope.version a file holding r needs: 1, 2 with a rotation (readers of version 1 would
// skip the inverse rotation), 3 with flattened axes (codes and scales in the flattened view's
// shape, which readers before 3 refuse against NAME.shape, as they should), 4 with leading
// flattened axes (NAME.flatten "lead", which readers before 4 refuse by name). A file takes the
// largest over its tensors.
int packed_version(const CastResult& r);
// The tensors packed tensor NAME holding r is stored as, in file order (key, tensor): its parts,
// each densely packed where its values are narrower than their storage (docs/export-formats.md,
// "Packing"). Raises `version` to what they need (4 for a densely packed part).
std::vector<std::pair<std::string, Tensor>> packed_file_tensors(const std::string& name,
                                                                const CastResult& r, int& version);

// `shown`: the path errors name (default `path`), for a file staged on its way there.
void save_packed(const std::string& path, const std::vector<PackedTensor>& tensors,
                 const std::vector<std::pair<std::string, std::string>>& extra_metadata = {},
                 const std::string& shown = "");
std::vector<PackedTensor> load_packed(const std::string& path);

}  // namespace castscope::io
