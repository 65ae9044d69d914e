// Model directories: an export of a model read from a directory or a sharded index keeps its
// source's shape (docs/export-formats.md, "Model directories"), so that the stacks that load
// directories (transformers, vLLM) load the result.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "castscope/export.hpp"

namespace castscope {

namespace fs = std::filesystem;
using nlohmann::json;

namespace exportdetail {

OutputFiles::OutputFiles(std::string out, const ExportOptions& o) : out_(std::move(out)), opt_(o) {
  if (opt_.shards.empty())
    shards_.emplace_back(out_, std::make_unique<SafetensorsStreamWriter>(out_));
}

void OutputFiles::route(const io::TensorInfo& info) {
  if (opt_.shards.empty()) return;
  auto it = opt_.shards.find(info.file);
  if (it == opt_.shards.end())
    throw Error("'" + info.file + "' is not a file of the exported model");
  for (cur_ = 0; cur_ < shards_.size(); ++cur_)
    if (shards_[cur_].first == it->second) return;
  // Shards are opened in the order the model lists its files, so the output keeps that order.
  shards_.emplace_back(it->second,
                       std::make_unique<SafetensorsStreamWriter>(out_ + "/" + it->second));
}

void OutputFiles::add(const std::string& name, const Tensor& t) {
  for (const auto& [file, w] : shards_)
    if (w->contains(name))
      throw Error("duplicate tensor name '" + name + "' (two source tensors map to it)");
  shards_.at(cur_).second->add(name, t);
  weight_map_[name] = shards_[cur_].first;
}

void OutputFiles::finish(const std::map<std::string, std::string>& metadata, JobControl* job,
                         ExportReport& rep) {
  uint64_t total = 0;
  for (auto& [file, w] : shards_) {
    total += w->data_bytes();
    w->finish(metadata, job);
    rep.files.push_back(opt_.shards.empty() ? file : out_ + "/" + file);
  }
  if (opt_.index_name.empty()) return;
  const std::string path = out_ + "/" + opt_.index_name;
  const std::string text =
      json({{"metadata", {{"total_size", total}}}, {"weight_map", weight_map_}}).dump(2) + "\n";
  io::write_atomically(path, [&](const auto& put) { put(text.data(), text.size()); });
  rep.files.push_back(path);
}

}  // namespace exportdetail

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

json read_config(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return json::object();
  std::ostringstream ss;
  ss << f.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error("'" + p.string() + "': config.json is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error("'" + p.string() + "': config.json is not a JSON object");
  return j;
}

// The keys transformers' Mxfp4Config reads: modules left in their stored dtype are listed so that
// the loader does not look for _blocks / _scales of theirs.
void merge_gpt_oss_config(const fs::path& config, const ExportReport& rep) {
  json j = read_config(config);
  std::set<std::string> kept;
  for (const ExportedTensor& t : rep.tensors)
    if (t.dtype.rfind("keep:", 0) == 0 && t.shape.size() >= 2)
      kept.insert(ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name);
  j["quantization_config"] = {{"quant_method", "mxfp4"}, {"modules_to_not_convert", kept}};
  const std::string text = j.dump(2) + "\n";
  io::write_atomically(config.string(), [&](const auto& put) { put(text.data(), text.size()); });
}

ExportReport export_directory(const io::Model& model, const std::string& out,
                              const ExportPlan& plan, const ExportOptions& options,
                              JobControl* job) {
  const fs::path src(model.path());
  const bool from_index = !fs::is_directory(src);
  const fs::path src_dir =
      !from_index ? src : (src.parent_path().empty() ? fs::path(".") : src.parent_path());
  ExportOptions o = options;
  // Source weight files -> shard names, in the order the model lists them.
  std::set<fs::path> weight_files;
  std::set<std::string> names;
  for (const io::TensorInfo& t : model.tensors()) {
    if (o.shards.count(t.file)) continue;
    fs::path f(t.file);
    weight_files.insert(fs::weakly_canonical(f));
    std::string name = f.filename().string();
    if (!ends_with(name, ".safetensors")) name = f.stem().string() + ".safetensors";
    if (!names.insert(name).second)
      throw Error("'" + model.path() + "': two source files would both be written as '" + name +
                  "'");
    o.shards[t.file] = name;
  }
  if (from_index)
    o.index_name = src.filename().string();
  else if (o.shards.size() > 1)
    o.index_name = "model.safetensors.index.json";
  const fs::path target(out);
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (!fs::is_directory(parent))
    throw Error("cannot write '" + out + "': directory '" + parent.string() + "' does not exist");
  const fs::path staged =
      parent / ("." + target.filename().string() + ".staged-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(staged, ec);
  try {
    fs::create_directory(staged);
    // Everything that is not a weight file or a shard index travels unchanged (tokenizer,
    // generation config, chat template, README, ...); copy_file follows the symlinks of a
    // Hugging Face cache snapshot.
    for (auto it = fs::recursive_directory_iterator(src_dir);
         it != fs::recursive_directory_iterator(); ++it) {
      // Lexically: fs::relative would resolve a snapshot's links into the blob store.
      const fs::path rel = it->path().lexically_relative(src_dir);
      if (rel.empty() || *rel.begin() == "..")
        throw Error("'" + it->path().string() + "' is not inside '" + src_dir.string() + "'");
      if (it->is_directory()) {
        if (it->path().filename().string().rfind(".", 0) == 0) {
          it.disable_recursion_pending();  // .git, .cache: not part of the model
          continue;
        }
        fs::create_directories(staged / rel);
        continue;
      }
      if (!it->is_regular_file()) continue;
      if (weight_files.count(fs::weakly_canonical(it->path()))) continue;
      const std::string fname = it->path().filename().string();
      if (it.depth() == 0 && ends_with(fname, ".index.json")) continue;
      fs::copy_file(it->path(), staged / rel, fs::copy_options::overwrite_existing);
    }
    const fs::path config = staged / "config.json";
    if (o.layout == Layout::CompressedTensors && o.config_path.empty())
      o.config_path = config.string();
    ExportReport rep = exportdetail::export_layout(model, staged.string(), plan, o, job);
    if (o.layout == Layout::GptOss) merge_gpt_oss_config(config, rep);
    if (job) job->check();
    fs::rename(staged, target);
    // Name the files as they now are.
    const std::string s = staged.string();
    for (std::string& f : rep.files)
      if (f.rfind(s, 0) == 0) f = out + f.substr(s.size());
    rep.directory = out;
    return rep;
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staged, ec);
    throw Error("exporting to '" + out + "': " + e.what());
  } catch (...) {
    fs::remove_all(staged, ec);
    throw;
  }
}

}  // namespace

ExportReport export_model(const io::Model& model, const std::string& out, const ExportPlan& plan,
                          const ExportOptions& options, JobControl* job) {
  std::error_code ec;
  const bool dir_source =
      fs::is_directory(model.path(), ec) || ends_with(model.path(), ".index.json");
  // OUT named *.safetensors still asks for one file, as before model directories existed.
  if (dir_source && options.layout != Layout::GGUF && options.shards.empty() &&
      !fs::exists(out, ec) && !ends_with(out, ".safetensors")) {
    std::string dir = out;  // "OUT/" names the same new directory
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return export_directory(model, dir, plan, options, job);
  }
  return exportdetail::export_layout(model, out, plan, options, job);
}

}  // namespace castscope
