#include "demo_assets.hpp"

#include <cstring>
#include <filesystem>

namespace castscope::gui {

Tensor parse_demo_npy(const uint8_t* p, size_t n, const std::string& what) {
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0 || p[6] != 1)
    throw Error(what + ": not a version 1 .npy");
  const size_t hl = p[8] | (static_cast<size_t>(p[9]) << 8);
  if (10 + hl > n) throw Error(what + ": truncated .npy header");
  const std::string h(reinterpret_cast<const char*>(p + 10), hl);
  if (h.find("'<f4'") == std::string::npos || h.find("'fortran_order': False") == std::string::npos)
    throw Error(what + ": demo tensors must be little-endian float32 in C order");
  const size_t a = h.find("'shape': ("), b = h.find(')', a);
  if (a == std::string::npos || b == std::string::npos)
    throw Error(what + ": .npy header has no shape");
  Shape shape;
  std::string dims = h.substr(a + 10, b - a - 10);
  for (size_t i = 0; i < dims.size();) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    size_t j = i;
    while (j < dims.size() && dims[j] >= '0' && dims[j] <= '9') ++j;
    if (j > i) shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j + (j == i);
  }
  Tensor t = Tensor::empty(DType::F32, shape);
  if (10 + hl + t.nbytes() > n) throw Error(what + ": truncated .npy data");
  std::memcpy(t.mutable_data(), p + 10 + hl, t.nbytes());
  return t;
}

namespace {

class MemoryModel : public io::Model {
 public:
  MemoryModel(std::string path, std::string format) : format_(std::move(format)) {
    path_ = std::move(path);
  }
  void add(const std::string& name, Tensor t, const std::string& file) {
    io::TensorInfo info;
    info.name = name;
    info.dtype = dtype_name(t.dtype());
    info.shape = t.shape();
    info.nbytes = t.nbytes();
    info.file = file;
    // Nothing in an .npy shows a layout: the rule by rank, marked guessed, as open_model does.
    info.layout = default_layout(info.shape);
    infos_.push_back(info);
    data_.push_back(std::move(t));
  }
  const std::vector<io::TensorInfo>& tensors() const override { return infos_; }
  Tensor load(const std::string& name) const override {
    for (size_t i = 0; i < infos_.size(); ++i)
      if (infos_[i].name == name)
        return data_[i].dtype() == DType::F32 ? data_[i] : data_[i].to_f32();
    throw Error("no tensor named '" + name + "' in " + path_);
  }
  std::string format() const override { return format_; }

 private:
  std::string format_;
  std::vector<io::TensorInfo> infos_;
  std::vector<Tensor> data_;
};

}  // namespace

std::unique_ptr<io::Model> open_demo_model() {
  auto m = std::make_unique<MemoryModel>("demo", "embedded demo");
  for (const EmbeddedFile& f : embedded_demo_files())
    m->add(std::string("demo/") + f.name,
           parse_demo_npy(f.data, f.size, std::string("demo:") + f.name), "(embedded)");
  return m;
}

std::unique_ptr<io::Model> open_npy_model(const std::string& path) {
  auto m = std::make_unique<MemoryModel>(path, "npy");
  m->add(std::filesystem::path(path).stem().string(), io::load_npy(path), path);
  return m;
}

std::unique_ptr<io::Model> open_any(const std::string& spec, std::string* tensor) {
  if (spec == "demo" || spec.rfind("demo:", 0) == 0) {
    auto m = open_demo_model();
    const std::string want = spec.size() > 5 ? "demo/" + spec.substr(5) : m->tensors().front().name;
    if (!m->find(want)) {
      std::string names;
      for (const auto& t : m->tensors()) names += " " + t.name.substr(5);
      throw Error("no demo tensor '" + spec.substr(5) + "'; demo tensors:" + names);
    }
    if (tensor) *tensor = want;
    return m;
  }
  std::unique_ptr<io::Model> m;
  const std::string ext = std::filesystem::path(spec).extension().string();
  if (ext == ".npy")
    m = open_npy_model(spec);
  else
    m = io::open_model(spec);
  if (tensor) {
    tensor->clear();
    for (const io::TensorInfo& t : m->tensors()) {
      const std::string& d = t.dtype;
      // Pick the first floating-point tensor with at least two dimensions: a weight matrix.
      const bool fl = d.find('F') != std::string::npos || d.find('f') != std::string::npos ||
                      d.find("BF") != std::string::npos;
      if (fl && t.shape.size() >= 2) {
        *tensor = t.name;
        break;
      }
    }
    if (tensor->empty() && !m->tensors().empty()) *tensor = m->tensors().front().name;
  }
  return m;
}

}  // namespace castscope::gui
