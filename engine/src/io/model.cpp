// open_model: format detection, directories and sharded index files, and the shared reader
// helpers (file maps, checked sizes, raw tensor views).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "families/ggml/ggml_types.hpp"
#include "io/quantized/quantized.hpp"
#include "io/reader.hpp"

namespace castscope::io {

Tensor Model::load_raw(const std::string& name) const {
  throw Error("'" + path_ + "': this reader cannot give tensor '" + name + "' in its stored dtype");
}

bool is_float_storage(const std::string& d) {
  static const std::set<std::string> kFloat = {
      // safetensors
      "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2",
      // numpy / castscope
      "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
      // GGUF (F32 / F16 / BF16 shared with safetensors)
      "Q8_0", "Q4_0", "MXFP4",
      // ONNX
      "FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "FLOAT8E4M3FN", "FLOAT8E5M2", "FLOAT8E4M3FNUZ",
      "FLOAT8E5M2FNUZ"};
  if (kFloat.count(d)) return true;
  // GGUF block formats that decode to float32 (Q4_1, K-quants, IQ types, NVFP4, ...).
  const ggml::TypeInfo* g = ggml::type_by_name(d);
  return g && g->block > 1 && g->decodes;
}

namespace detail {

namespace fs = std::filesystem;

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "' for reading: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file");
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<uint64_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error("cannot memory-map '" + path + "': " + why);
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

EntryModel::EntryModel(std::string path, std::string format, std::vector<Entry> entries)
    : format_(std::move(format)), entries_(std::move(entries)) {
  path_ = std::move(path);
  infos_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    const TensorInfo& t = entries_[i].info;
    auto [it, fresh] = index_.emplace(t.name, i);
    if (!fresh)
      throw Error("'" + path_ + "': tensor '" + t.name + "' appears twice (in '" +
                  entries_[it->second].info.file + "' and '" + t.file + "')");
    infos_.push_back(t);
  }
}

const Entry& EntryModel::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("'" + path_ + "' has no tensor '" + name + "'");
  return entries_[it->second];
}

Tensor EntryModel::load(const std::string& name) const {
  return entry(name).load();
}

Tensor EntryModel::load_raw(const std::string& name) const {
  const Entry& e = entry(name);
  if (!e.raw)
    throw Error(where(e.info.file, name) + "stored as " + e.info.dtype +
                ", which has no plain dtype; use load() for float32");
  return e.raw();
}

std::string where(const std::string& file, const std::string& tensor) {
  return "'" + file + "': tensor '" + tensor + "': ";
}

uint64_t checked_numel(const Shape& shape, const std::string& file, const std::string& tensor) {
  unsigned __int128 n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(where(file, tensor) + "negative dimension in shape " + shape_str(shape));
    if (d > (int64_t{1} << 46))
      throw Error(where(file, tensor) + "absurd shape " + shape_str(shape));
    n *= static_cast<uint64_t>(d);
    if (n > (uint64_t{1} << 46))
      throw Error(where(file, tensor) + "absurd shape " + shape_str(shape));
  }
  return static_cast<uint64_t>(n);
}

uint64_t checked_nbytes(const Shape& shape, uint64_t elem_bytes, const std::string& file,
                        const std::string& tensor) {
  return checked_numel(shape, file, tensor) * elem_bytes;  // < 2^46 * 8: no overflow
}

Tensor copy_raw(const uint8_t* p, DType dtype, const Shape& shape, bool big_endian) {
  Tensor t = Tensor::empty(dtype, shape);
  const size_t n = t.nbytes();
  uint8_t* dst = static_cast<uint8_t*>(t.mutable_data());
  if (n) std::memcpy(dst, p, n);
  const size_t es = dtype_size(dtype);
  if (big_endian && es > 1)
    for (size_t i = 0; i < n; i += es) std::reverse(dst + i, dst + i + es);
  return t;
}

Tensor view_raw(std::shared_ptr<const void> owner, const uint8_t* p, DType dtype,
                const Shape& shape) {
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(dtype) == 0)
    return Tensor::borrow(dtype, shape, std::move(owner), p);
  return copy_raw(p, dtype, shape);
}

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Format of one file, from its first bytes where they are distinctive, else its extension.
std::string sniff(const std::string& path) {
  const std::string l = lower(path);
  unsigned char head[8] = {0};
  ssize_t got = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "' for reading: " + std::strerror(errno));
  got = ::read(fd, head, sizeof head);
  ::close(fd);
  if (got >= 4 && std::memcmp(head, "GGUF", 4) == 0) return "gguf";
  if (got >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return "npy";
  if (ends_with(l, ".npz") ||
      (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0 && !ends_with(l, ".onnx")))
    return "npz";
  if (ends_with(l, ".safetensors")) return "safetensors";
  if (ends_with(l, ".gguf")) return "gguf";
  if (ends_with(l, ".npy")) return "npy";
  if (ends_with(l, ".onnx")) return "onnx";
  throw Error("'" + path +
              "': unknown model format (expected .safetensors, .npy, .npz, .gguf, .onnx, a "
              "directory or a *.safetensors.index.json)");
}

std::vector<Entry> read_entries(const std::string& path, const std::string& fmt) {
  if (fmt == "safetensors") return read_safetensors(path);
  if (fmt == "npy") return read_npy_entries(path);
  if (fmt == "npz") return read_npz(path);
  if (fmt == "gguf") return read_gguf(path);
#ifdef CASTSCOPE_HAVE_ONNX
  return read_onnx(path);
#else
  throw Error("'" + path +
              "': this build of CastScope has no ONNX reader (built without libonnx-dev / "
              "libprotobuf-dev)");
#endif
}

// A file's entries with their layouts resolved; a checkpoint's config.json lies beside it.
std::vector<Entry> read_file(const std::string& path, const std::string& fmt) {
  std::vector<Entry> e = read_entries(path, fmt);
  const fs::path dir = fs::path(path).parent_path();
  resolve_layouts(e, fmt, dir.empty() ? std::string(".") : dir.string());
  return e;
}

// A quantized checkpoint's companions folded into logical weights (io/quantized/), which then get
// their layouts by their logical names and shapes; the other entries keep theirs.
std::vector<Entry> fold(std::vector<Entry> all, const std::string& dir) {
  fold_quantized(all, dir);
  resolve_layouts(all, "safetensors", dir);
  return all;
}

std::unique_ptr<Model> open_directory(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string p = de.path().string(), l = lower(p);
    if (!de.is_regular_file(ec)) continue;
    for (const char* ext : {".safetensors", ".npy", ".npz", ".gguf", ".onnx"})
      if (ends_with(l, ext)) files.push_back(p);
  }
  if (ec) throw Error("cannot list directory '" + dir + "': " + ec.message());
  if (files.empty())
    throw Error("directory '" + dir + "' holds no .safetensors, .npy, .npz, .gguf or .onnx file");
  std::sort(files.begin(), files.end());
  std::vector<Entry> all;
  std::set<std::string> formats;
  // Every unreadable file is reported, not only the first: a folder's fixes come all at once.
  std::vector<std::string> bad;
  for (const std::string& f : files) {
    try {
      const std::string fmt = sniff(f);
      std::vector<Entry> e = read_file(f, fmt);
      formats.insert(fmt);
      for (Entry& x : e) all.push_back(std::move(x));
    } catch (const Error& e) {
      bad.push_back(e.what());
    }
  }
  if (bad.size() == 1) throw Error(bad.front());
  if (!bad.empty()) {
    std::string msg = "directory '" + dir + "': " + std::to_string(bad.size()) + " of " +
                      std::to_string(files.size()) + " files cannot be read:";
    for (const std::string& b : bad) msg += "\n  " + b;
    throw Error(msg);
  }
  std::string fmt = formats.size() == 1 ? *formats.begin() : "mixed";
  return std::make_unique<EntryModel>(dir, fmt, fold(std::move(all), dir));
}

std::unique_ptr<Model> open_index(const std::string& path) {
  auto map = MappedFile::open(path);
  if (map->size() > (64u << 20)) throw Error("'" + path + "': index file is implausibly large");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(map->data(), map->data() + map->size());
  } catch (const nlohmann::json::exception& e) {
    throw Error("'" + path + "': not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error("'" + path + "': no \"weight_map\" object");
  const fs::path base = fs::path(path).parent_path();
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> wanted;  // file -> tensor names
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw Error(where(path, it.key()) + "weight_map value is not a file name");
    const std::string f = it.value().get<std::string>();
    if (f.empty() || fs::path(f).is_absolute() || f.find("..") != std::string::npos)
      throw Error(where(path, it.key()) + "file '" + f + "' is not a plain name beside the index");
    if (!wanted.count(f)) order.push_back(f);
    wanted[f].push_back(it.key());
  }
  std::vector<Entry> all;
  for (const std::string& f : order) {
    const std::string fp = (base / f).string();
    std::vector<Entry> e = read_file(fp, sniff(fp));
    std::set<std::string> names;
    for (const Entry& x : e) names.insert(x.info.name);
    for (const std::string& n : wanted[f])
      if (!names.count(n))
        throw Error(where(path, n) + "listed in weight_map but missing from '" + fp + "'");
    for (Entry& x : e) all.push_back(std::move(x));
  }
  return std::make_unique<EntryModel>(path, "safetensors",
                                      fold(std::move(all), base.empty() ? "." : base.string()));
}

}  // namespace
}  // namespace detail

namespace {
class Relisted : public Model {
 public:
  Relisted(std::shared_ptr<const Model> m, std::vector<TensorInfo> infos)
      : m_(std::move(m)), infos_(std::move(infos)) {
    path_ = m_->path();
  }
  const std::vector<TensorInfo>& tensors() const override { return infos_; }
  Tensor load(const std::string& name) const override { return m_->load(name); }
  Tensor load_raw(const std::string& name) const override { return m_->load_raw(name); }
  std::string format() const override { return m_->format(); }

 private:
  std::shared_ptr<const Model> m_;
  std::vector<TensorInfo> infos_;
};
}  // namespace

std::unique_ptr<Model> relist(std::shared_ptr<const Model> model, std::vector<TensorInfo> infos) {
  return std::make_unique<Relisted>(std::move(model), std::move(infos));
}

std::unique_ptr<Model> open_model(const std::string& path) {
  using namespace detail;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return open_directory(path);
  if (!fs::exists(path, ec)) throw Error("'" + path + "' does not exist");
  if (ends_with(lower(path), ".index.json")) return open_index(path);
  const std::string fmt = sniff(path);
  std::vector<Entry> e = read_file(path, fmt);
  if (fmt == "safetensors") {
    const fs::path dir = fs::path(path).parent_path();
    e = fold(std::move(e), dir.empty() ? std::string(".") : dir.string());
  }
  return std::make_unique<EntryModel>(path, fmt, std::move(e));
}

}  // namespace castscope::io
