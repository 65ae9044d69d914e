// Quantization layouts of checkpoint tensors (safetensors, npz, npy, GGUF), from what the files
// show: config.json's architecture (GPT-2's Conv1D stores [in, out]), Keras / TF names
// (`kernel`, `kernel:0`), the sibling bias's length (a channels-last kernel's bias matches its
// last axis, a PyTorch weight's bias its first), GGUF rows. Nothing shown: the rule by rank,
// marked guessed. docs/formats.md ("Quantization axis") has the table.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "io/reader.hpp"

namespace castscope::io::detail {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// The name without a TF ":0" output suffix.
std::string bare(const std::string& name) {
  return ends_with(name, ":0") ? name.substr(0, name.size() - 2) : name;
}

// Last name component (after '.' or '/') and the prefix before it.
std::pair<std::string, std::string> split_last(const std::string& name) {
  const std::string b = bare(name);
  const size_t k = b.find_last_of("./");
  if (k == std::string::npos) return {"", b};
  return {b.substr(0, k), b.substr(k + 1)};
}

struct Config {
  bool present = false;
  std::string model_type;  // config.json "model_type"
  std::string arch;        // first of "architectures"
  std::string file;
};

Config read_config(const std::string& dir) {
  Config c;
  if (dir.empty()) return c;
  const fs::path p = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > (16u << 20)) return c;
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) return c;  // not a transformers config: nothing learned from it
  c.file = p.string();
  if (j.contains("model_type") && j["model_type"].is_string())
    c.model_type = j["model_type"].get<std::string>();
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.arch = j["architectures"][0].get<std::string>();
  c.present = !c.model_type.empty() || !c.arch.empty();
  return c;
}

// transformers models whose blocks use `Conv1D` (weights [in, out]) and the module names that
// are Conv1D in them.
bool gpt2_family(const Config& c) {
  static const std::set<std::string> kTypes = {"gpt2", "openai-gpt", "imagegpt",
                                               "decision_transformer"};
  return kTypes.count(c.model_type) || c.arch.rfind("GPT2", 0) == 0 ||
         c.arch.rfind("OpenAIGPT", 0) == 0 || c.arch.rfind("ImageGPT", 0) == 0;
}
bool conv1d_module(const std::string& prefix) {
  const std::string last = split_last(prefix).second;
  return last == "c_attn" || last == "c_proj" || last == "c_fc" || last == "q_attn";
}

bool embedding_name(const std::string& name) {
  const std::string b = bare(name);
  for (const char* k : {"embed", "wte", "wpe", "token_embd", "tok_embeddings", "shared.weight"})
    if (b.find(k) != std::string::npos) return true;
  return false;
}

// Lengths of the 1-D float tensors that share a weight's prefix (bias, norm scales): a
// channels-last kernel's bias has its last axis's length, a PyTorch weight's its first.
std::map<std::string, std::set<int64_t>> sibling_lengths(const std::vector<Entry>& entries) {
  std::map<std::string, std::set<int64_t>> m;
  for (const Entry& e : entries)
    if (e.info.shape.size() == 1) m[split_last(e.info.name).first].insert(e.info.shape[0]);
  return m;
}

ResolvedLayout keras_layout(const Shape& s, const std::string& leaf, const std::string& why) {
  const int r = static_cast<int>(s.size());
  if (r == 2) return make_layout("dense [in, out]", {false, 0, false, false}, s, why);
  if (leaf == "depthwise_kernel")  // [k..., Cin, multiplier]: each output sums its k... alone
    return make_layout("keras depthwise [k..., Cin, m]", {false, r - 3, true, true}, s, why);
  return make_layout("keras conv [k..., Cin, Cout]", {false, r - 2, true, true}, s, why);
}

ResolvedLayout torch_layout(const Shape& s, const std::string& why) {
  const int r = static_cast<int>(s.size());
  if (r == 2) return make_layout("linear [out, in]", {}, s, why);
  if (r >= 3 && r <= 5) return make_layout("conv [O, I/g, k...]", {false, 1, true, false}, s, why);
  return make_layout("rows [out, in]", {}, s, why);
}

// A convolution kernel's spatial size: small and odd (1x1, 3x3, 5x5, 7x7 ...).
bool spatial(int64_t v) {
  return v >= 1 && v <= 11 && v % 2 == 1;
}
// A rank-4 kernel as TFLite / Keras store it, [kh, kw, Cin, Cout], told from PyTorch's and
// ONNX's [O, I/g, kh, kw] by where the small odd spatial sizes sit.
bool tflite_kernel_shape(const Shape& s) {
  return s.size() == 4 && spatial(s[0]) && spatial(s[1]) && !(spatial(s[2]) && spatial(s[3]));
}
bool torch_kernel_shape(const Shape& s) {
  return s.size() == 4 && spatial(s[2]) && spatial(s[3]) && !(spatial(s[0]) && spatial(s[1]));
}

// Where nothing in the file shows the layout: a file whose kernels all have TFLite's shape
// stores [kh, kw, Cin, Cout] (depthwise [kh, kw, C, 1]) and its Dense kernels [in, out]. Still
// guessed, with the shape as the reason.
std::optional<ResolvedLayout> tflite_layout(const Shape& s, bool tflite_file) {
  if (!tflite_file) return std::nullopt;
  const std::string why =
      "TFLite kernel shape: the first two axes are small odd spatial sizes, as TFLite / Keras "
      "store [kh, kw, Cin, Cout] (layout guessed: nothing in the file shows it)";
  ResolvedLayout l;
  if (tflite_kernel_shape(s))
    l = keras_layout(s, s[3] == 1 && s[2] > 1 ? "depthwise_kernel" : "kernel", why);
  else if (s.size() == 2)
    l = keras_layout(s, "kernel",
                     "TFLite kernel shape: a Dense kernel [in, out] beside [kh, kw, Cin, Cout] "
                     "kernels (layout guessed: nothing in the file shows it)");
  else
    return std::nullopt;
  l.guessed = true;
  return l;
}

ResolvedLayout checkpoint_layout(const Entry& e, const Config& cfg,
                                 const std::map<std::string, std::set<int64_t>>& sib,
                                 const std::string& format, bool tflite_file) {
  const Shape& s = e.info.shape;
  const std::string& name = e.info.name;
  if (s.size() <= 1) return default_layout(s);
  if (format == "onnx") {  // the graph decided; where it says nothing, the shapes may
    if (std::optional<ResolvedLayout> t = tflite_layout(s, tflite_file)) return *t;
    return default_layout(s);
  }
  if (format == "gguf") {
    ResolvedLayout l = make_layout(embedding_name(name) ? "embedding [rows, dim]" : "ggml rows", {},
                                   s, "GGUF stores rows; ggml quantizes along them");
    l.embedding = embedding_name(name);
    return l;
  }
  const auto [prefix, leaf] = split_last(name);
  if (s.size() == 2 && embedding_name(name)) {
    ResolvedLayout l = make_layout("embedding [rows, dim]", {}, s,
                                   "name '" + name + "' is an embedding table (rows looked up)");
    l.embedding = true;
    return l;
  }
  if (cfg.present) {
    // A config without "model_type" names its model by the architecture only.
    const std::string src = cfg.model_type.empty()
                                ? "config.json architecture '" + cfg.arch + "'"
                                : "config.json model_type '" + cfg.model_type + "'";
    const bool gpt_oss = cfg.model_type == "gpt_oss" || cfg.arch.rfind("GptOss", 0) == 0;
    if (gpt2_family(cfg) && s.size() == 2 && leaf == "weight" && conv1d_module(prefix))
      return make_layout("gpt2 conv1d [in, out]", {false, 0, false, false}, s,
                         src + ": transformers' Conv1D stores [in, out]");
    if (gpt_oss && s.size() == 3 && name.find("experts") != std::string::npos)
      return make_layout("experts [E, in, out]", {false, 1, false, false}, s,
                         src + ": gpt-oss experts store [E, in, out]");
    if (s.size() == 3 && name.find("experts") != std::string::npos)
      return make_layout("experts [E, out, in]", {}, s, src + ": stacked nn.Linear experts");
    if (s.size() == 2 || s.size() == 4 || s.size() == 5)
      return torch_layout(s, src + ": PyTorch modules store [out, in, ...]");
  }
  const bool keras_name = leaf == "kernel" || leaf == "depthwise_kernel";
  if (keras_name)
    return keras_layout(s, leaf, "name '" + name + "': Keras / TF kernels store [..., in, out]");
  auto it = sib.find(prefix);
  if (it != sib.end() && s.front() != s.back()) {
    const bool last = it->second.count(s.back()) > 0, first = it->second.count(s.front()) > 0;
    if (last && !first)
      return keras_layout(s, leaf,
                          "1-D '" + prefix + "' tensors of length " + std::to_string(s.back()) +
                              " match the last axis: channels-last [..., in, out]");
    if (first && !last)
      return torch_layout(s, "1-D '" + prefix + "' tensors of length " + std::to_string(s.front()) +
                                 " match the first axis: PyTorch [out, in, ...]");
  }
  if (leaf == "weight" && s.size() == 2)
    return torch_layout(s, "name '" + name + "': a PyTorch state dict's nn.Linear [out, in]");
  if (s.size() == 3 && name.find("experts") != std::string::npos)
    return make_layout("experts [E, out, in]", {}, s, "name: stacked nn.Linear experts");
  if (std::optional<ResolvedLayout> t = tflite_layout(s, tflite_file)) return *t;
  return default_layout(s);
}

}  // namespace

void resolve_layouts(std::vector<Entry>& entries, const std::string& format,
                     const std::string& config_dir) {
  const Config cfg = format == "gguf" ? Config{} : read_config(config_dir);
  const auto sib = sibling_lengths(entries);
  // A file whose rank-4 kernels all have TFLite's shape (none PyTorch's), for the tensors
  // nothing else resolves.
  bool tflite = false, torch = false;
  for (const Entry& e : entries) {
    tflite |= tflite_kernel_shape(e.info.shape);
    torch |= torch_kernel_shape(e.info.shape);
  }
  const bool tflite_file = tflite && !torch && format != "gguf";
  for (Entry& e : entries) {
    if (!e.info.layout.empty()) continue;
    try {
      e.info.layout = checkpoint_layout(e, cfg, sib, format, tflite_file);
    } catch (const Error&) {
      e.info.layout = default_layout(e.info.shape);
    }
  }
}

}  // namespace castscope::io::detail
