// Shared pieces of the model readers: read-only file maps, bounds-checked byte access, and a
// Model built from per-tensor loaders so every format lists from headers and loads lazily.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "castscope/io.hpp"

namespace castscope::ggml {
struct TypeInfo;
}
namespace onnx {
class GraphProto;
}

namespace castscope::io::detail {

// A read-only memory map of a whole file. Pages are only touched when read, so mapping a large
// checkpoint and parsing its header costs the header.
class MappedFile {
 public:
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// One listed tensor and how to produce it: `load` gives float32, `raw` the stored dtype (empty
// function when the storage has no DType, e.g. GGUF block formats).
struct Entry {
  TensorInfo info;
  std::function<Tensor()> load;
  std::function<Tensor()> raw;
};

class EntryModel : public Model {
 public:
  EntryModel(std::string path, std::string format, std::vector<Entry> entries);
  const std::vector<TensorInfo>& tensors() const override { return infos_; }
  Tensor load(const std::string& name) const override;
  Tensor load_raw(const std::string& name) const override;
  std::string format() const override { return format_; }

 private:
  const Entry& entry(const std::string& name) const;
  std::string format_;
  std::vector<Entry> entries_;
  std::vector<TensorInfo> infos_;
  std::unordered_map<std::string, size_t> index_;
};

// "'file': tensor 'name': why" — the common shape of reader errors.
std::string where(const std::string& file, const std::string& tensor);

// Checked element count and byte size of a stored tensor; throws Error for negative or absurd
// dimensions (the product must stay below 2^46 elements).
uint64_t checked_numel(const Shape& shape, const std::string& file, const std::string& tensor);
uint64_t checked_nbytes(const Shape& shape, uint64_t elem_bytes, const std::string& file,
                        const std::string& tensor);

// A stored array of `dtype` at `p` (any alignment, little-endian unless `big_endian`) as a tensor
// that owns aligned native-endian storage.
Tensor copy_raw(const uint8_t* p, DType dtype, const Shape& shape, bool big_endian = false);
// Borrows the bytes when they are aligned and little-endian, copies otherwise.
Tensor view_raw(std::shared_ptr<const void> owner, const uint8_t* p, DType dtype,
                const Shape& shape);

// Per-format table readers. Each maps or opens `path`, validates the header and returns entries
// whose loaders keep the map alive.
std::vector<Entry> read_safetensors(const std::string& path);
std::vector<Entry> read_npy_entries(const std::string& path);
std::vector<Entry> read_npz(const std::string& path);
std::vector<Entry> read_gguf(const std::string& path);

// A GGUF file's header as stored: every key-value record's byte range (so an exporter can copy
// them unchanged) and every tensor info, checked against the file.
struct GgufKv {
  std::string key;
  uint64_t begin, end;  // the record: key, value type and value
};
struct GgufTensor {
  std::string name;
  Shape shape;  // slowest axis first
  uint32_t type_id;
  const ggml::TypeInfo* type;  // null for an id ggml's table does not know
  uint64_t offset, nbytes;     // within the data block; nbytes 0 when the type is unknown
};
struct GgufHeader {
  std::shared_ptr<const MappedFile> map;
  std::vector<GgufKv> kvs;
  std::vector<GgufTensor> tensors;
  uint64_t alignment = 32, data_start = 0;
};
GgufHeader parse_gguf(const std::string& path);
// Bounds-checked little-endian reader over a mapped GGUF header (or one key-value record of it:
// `size` bounds the reads).
struct GgufCursor {
  const uint8_t* p;
  uint64_t size, pos = 0;
  const std::string& path;

  void need(uint64_t n) const {
    if (n > size - pos)
      throw Error("'" + path + "': truncated GGUF header (at byte " + std::to_string(pos) + ")");
  }
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    if (n > (1u << 24))
      throw Error("'" + path + "': GGUF string of " + std::to_string(n) + " bytes is implausible");
    need(n);
    std::string s(reinterpret_cast<const char*>(p + pos), n);
    pos += n;
    return s;
  }
  void skip(uint64_t n) {
    need(n);
    pos += n;
  }
};

std::vector<Entry> read_onnx(const std::string& path);

// Fills the quantization layout of every entry that has none (layout_rules.cpp): checkpoint
// conventions (config.json in `config_dir`, Keras / TF names, sibling biases), GGUF rows, else
// the rule by rank marked guessed. ONNX entries get theirs from the graph in read_onnx.
void resolve_layouts(std::vector<Entry>& entries, const std::string& format,
                     const std::string& config_dir);
// ONNX: each initializer's layout from the nodes that consume it (onnx_layout.cpp).
void resolve_onnx_layouts(const onnx::GraphProto& g, std::vector<Entry>& entries);

// .npy header of an in-memory buffer (file or zip member); `what` names it in errors.
struct NpyHeader {
  DType dtype = DType::F32;
  Shape shape;
  bool fortran = false;
  bool big_endian = false;
  uint64_t data_offset = 0;
  uint64_t nbytes = 0;
};
// `header_only`: `size` covers the header alone, so the data is not checked against it.
NpyHeader parse_npy_header(const uint8_t* p, uint64_t size, const std::string& what,
                           bool header_only = false);
// Decodes npy payload bytes (data_offset already applied) into a C-order native tensor.
Tensor decode_npy_data(const NpyHeader& h, const uint8_t* data);

}  // namespace castscope::io::detail
