// The safetensors writers (in memory and streamed), their read-back check, and the helpers the
// exporters share.
#include <cctype>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "castscope/export.hpp"
#include "core/dtype_format.hpp"
#include "io/json_fields.hpp"

namespace castscope {

using nlohmann::json;

namespace exportdetail {

uint32_t crc32_of(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

DType stored_dtype(const io::TensorInfo& info) {
  try {
    return io::parse_safetensors_dtype(info.dtype);
  } catch (const Error&) {
  }
  static const std::pair<const char*, DType> names[] = {
      {"float32", DType::F32}, {"float16", DType::F16}, {"bfloat16", DType::BF16},
      {"float64", DType::F64}, {"uint8", DType::U8},    {"int8", DType::I8},
      {"int16", DType::I16},   {"int32", DType::I32},   {"int64", DType::I64},
      {"uint16", DType::U16},  {"uint32", DType::U32},  {"uint64", DType::U64},
      {"bool", DType::Bool},   {"BF16", DType::BF16},   {"F16", DType::F16},
      {"float", DType::F32},   {"double", DType::F64}};
  // Case aside: ONNX names its element types FLOAT, INT64, BOOL, ...
  auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  };
  for (const auto& [n, d] : names)
    if (same(info.dtype, n)) return d;
  return DType::F32;  // quantized GGUF blocks, ONNX-only types: float32 is what load() gives
}

void keep_tensor(OutputFiles& w, const io::TensorInfo& info, const Tensor& x, ExportedTensor& et) {
  const DType sd = stored_dtype(info);
  et.dtype = std::string("keep:") + dtype_name(sd);
  Tensor t = to_storage(x, sd);
  w.add(info.name, t);
  et.bytes_out = t.nbytes();
}

VerifyReader::VerifyReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("verifying '" + path_ + "': cannot open: " + std::strerror(errno));
}

VerifyReader::~VerifyReader() {
  ::close(fd_);
}

void VerifyReader::read_at(void* dst, size_t n, uint64_t off) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw Error("verifying '" + path_ + "': short read at offset " + std::to_string(off));
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
}

Tensor to_storage(const Tensor& x, DType d) {
  if (x.dtype() == d) return x;
  Tensor f = x.dtype() == DType::F32 ? x : x.to_f32();
  if (d == DType::F32) return f;
  const float* in = f.ptr<float>();
  const int64_t n = f.numel();
  if (const char* spec = dtype_format(d)) {
    // Unscaled casts give the storage codes; exact for values that came from that type.
    CastOptions o;
    o.mode = CastMode::Actual;
    o.overflow = Overflow::IEEE;
    o.device = Device::CPU;
    return cast(f, DataType::parse(spec), o).codes;
  }
  Tensor out = Tensor::empty(d, f.shape());
  void* dst = out.mutable_data();
  for (int64_t i = 0; i < n; ++i) {
    const double v = in[i];
    switch (d) {
      case DType::F64:
        static_cast<double*>(dst)[i] = v;
        break;
      case DType::Bool:
        static_cast<uint8_t*>(dst)[i] = v != 0;
        break;
      case DType::U8:
        static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(std::llround(v));
        break;
      case DType::I8:
        static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(std::llround(v));
        break;
      case DType::U16:
        static_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(std::llround(v));
        break;
      case DType::I16:
        static_cast<int16_t*>(dst)[i] = static_cast<int16_t>(std::llround(v));
        break;
      case DType::U32:
        static_cast<uint32_t*>(dst)[i] = static_cast<uint32_t>(std::llround(v));
        break;
      case DType::I32:
        static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(std::llround(v));
        break;
      case DType::U64:
        static_cast<uint64_t*>(dst)[i] = static_cast<uint64_t>(std::llround(v));
        break;
      case DType::I64:
        static_cast<int64_t*>(dst)[i] = std::llround(v);
        break;
      default:
        throw Error(std::string("cannot store float32 values as ") + dtype_name(d));
    }
  }
  return out;
}

void commit_verified(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& write,
    const std::function<void(const std::string&)>& verify) {
  const std::string staged = path + ".staged-" + std::to_string(::getpid());
  io::write_atomically(staged, write, path);
  try {
    verify(staged);
  } catch (const Cancelled&) {
    ::unlink(staged.c_str());
    throw;
  } catch (const Error& e) {
    ::unlink(staged.c_str());
    // The staged name means nothing to the user: the message names the file they asked for.
    std::string m = e.what();
    for (size_t at = m.find(staged); at != std::string::npos; at = m.find(staged, at + path.size()))
      m.replace(at, staged.size(), path);
    throw Error(m);
  } catch (...) {
    ::unlink(staged.c_str());
    throw;
  }
  if (::rename(staged.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(staged.c_str());
    throw Error("cannot write '" + path + "': " + why);
  }
}

SubJob::SubJob(JobControl* outer, double base, double width) {
  if (!outer) return;
  if (outer->cancel.load()) inner.cancel = true;
  inner.on_progress = [this, outer, base, width](double f) {
    if (outer->cancel.load()) inner.cancel = true;
    outer->report(base + width * f);
  };
}

}  // namespace exportdetail

namespace {

struct Expected {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
  uint32_t crc;
};

std::string header_json(const std::vector<Expected>& entries,
                        const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  for (const Expected& e : entries)
    h[e.name] = {{"dtype", io::safetensors_dtype(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {e.begin, e.end}}};
  std::string s = h.dump();
  while ((8 + s.size()) % 8) s += ' ';
  return s;
}

void put_header(const std::function<void(const void*, size_t)>& put, const std::string& hs) {
  uint8_t len[8];
  const uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  put(len, 8);
  put(hs.data(), hs.size());
}

// Re-reads a written safetensors file and checks every entry against what was meant to be written.
void verify_safetensors(const std::string& path, const std::vector<Expected>& entries,
                        JobControl* job) {
  const exportdetail::VerifyReader file(path);
  auto read_at = [&](void* dst, size_t n, uint64_t off) { file.read_at(dst, n, off); };
  uint8_t len[8];
  read_at(len, 8, 0);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (hl > (200u << 20))
    throw Error("verifying '" + path + "': header length " + std::to_string(hl) + " is absurd");
  std::string hs(hl, '\0');
  read_at(hs.data(), hl, 8);
  json h;
  try {
    h = json::parse(hs);
  } catch (const json::exception& e) {
    throw Error("verifying '" + path + "': header is not valid JSON (" + e.what() + ")");
  }
  const uint64_t base = 8 + hl;
  std::vector<char> buf(8u << 20);
  for (const Expected& e : entries) {
    if (job) job->check();
    const std::string where = "verifying '" + path + "': tensor '" + e.name + "': ";
    if (!h.contains(e.name)) throw Error(where + "missing from the header");
    const json& j = h[e.name];
    if (j.value("dtype", "") != io::safetensors_dtype(e.dtype) ||
        io::detail::json_shape(j.at("shape"), path, e.name + " shape") != e.shape ||
        io::detail::json_unsigned(j.at("data_offsets").at(0), path, e.name + " offset") !=
            e.begin ||
        io::detail::json_unsigned(j.at("data_offsets").at(1), path, e.name + " offset") != e.end)
      throw Error(where + "header entry differs from what was written");
    uint32_t crc = 0;
    for (uint64_t off = e.begin; off < e.end;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), e.end - off));
      read_at(buf.data(), n, base + off);
      crc = exportdetail::crc32_of(buf.data(), n, crc);
      off += n;
    }
    if (crc != e.crc) throw Error(where + "data read back does not match (CRC-32)");
  }
}

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata, JobControl* job) {
  std::vector<Expected> entries;
  std::map<std::string, int> seen;
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      throw Error("'" + path + "': invalid tensor name '" + name + "'");
    if (seen[name]++) throw Error("'" + path + "': duplicate tensor name '" + name + "'");
    if (!t.defined() && t.numel() != 0)
      throw Error("'" + path + "': tensor '" + name + "' has no data");
    entries.push_back({name, t.dtype(), t.shape(), off, off + t.nbytes(),
                       exportdetail::crc32_of(t.data(), t.nbytes())});
    off += t.nbytes();
  }
  const std::string hs = header_json(entries, metadata);
  exportdetail::commit_verified(
      path,
      [&](const auto& put) {
        put_header(put, hs);
        for (size_t i = 0; i < tensors.size(); ++i) {
          if (job) {
            job->check();
            job->report(static_cast<double>(i) / static_cast<double>(tensors.size()));
          }
          if (tensors[i].second.nbytes()) put(tensors[i].second.data(), tensors[i].second.nbytes());
        }
      },
      [&](const std::string& staged) { verify_safetensors(staged, entries, job); });
  if (job) job->report(1.0);
}

// ---------------------------------------------------------------------------------------------

SafetensorsStreamWriter::SafetensorsStreamWriter(std::string path) : path_(std::move(path)) {
  std::string dir = ".";
  const size_t slash = path_.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path_.substr(0, slash);
#ifdef O_TMPFILE
  spill_fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (spill_fd_ < 0) {
    // No O_TMPFILE here: a named file, unlinked at once so that nothing survives a crash.
    const std::string tmp = path_ + ".spill-" + std::to_string(::getpid());
    spill_fd_ = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (spill_fd_ >= 0) ::unlink(tmp.c_str());
  }
  if (spill_fd_ < 0) throw Error(io::cannot_create(path_, errno));
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (spill_fd_ >= 0) ::close(spill_fd_);
}

bool SafetensorsStreamWriter::contains(const std::string& name) const {
  return index_.count(name) != 0;
}

void SafetensorsStreamWriter::add(const std::string& name, const Tensor& t) {
  if (name.empty() || name == "__metadata__")
    throw Error("'" + path_ + "': invalid tensor name '" + name + "'");
  if (contains(name))
    throw Error("'" + path_ + "': duplicate tensor name '" + name +
                "' (two source tensors map to it)");
  const char* p = static_cast<const char*>(t.data());
  size_t n = t.nbytes();
  const uint32_t crc = exportdetail::crc32_of(p, n);
  while (n > 0) {
    const ssize_t w = ::write(spill_fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("writing '" + path_ + "' failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  index_[name] = entries_.size();
  entries_.push_back({name, t.dtype(), t.shape(), offset_, offset_ + t.nbytes(), crc});
  offset_ += t.nbytes();
}

void SafetensorsStreamWriter::finish(const std::map<std::string, std::string>& metadata,
                                     JobControl* job) {
  std::vector<Expected> exp;
  exp.reserve(entries_.size());
  for (const Entry& e : entries_) exp.push_back({e.name, e.dtype, e.shape, e.begin, e.end, e.crc});
  const std::string hs = header_json(exp, metadata);
  exportdetail::commit_verified(
      path_,
      [&](const auto& put) {
        put_header(put, hs);
        std::vector<char> buf(8u << 20);
        for (uint64_t off = 0; off < offset_;) {
          if (job) job->check();
          const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), offset_ - off));
          const ssize_t r = ::pread(spill_fd_, buf.data(), want, static_cast<off_t>(off));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0)
            throw Error("writing '" + path_ + "' failed: temporary data could not be read back");
          put(buf.data(), static_cast<size_t>(r));
          off += static_cast<uint64_t>(r);
        }
      },
      [&](const std::string& staged) { verify_safetensors(staged, exp, job); });
  ::close(spill_fd_);
  spill_fd_ = -1;
}

// ---------------------------------------------------------------------------------------------

void MemoryModel::add(const std::string& name, const Tensor& t) {
  if (data_.count(name)) throw Error("duplicate tensor name '" + name + "'");
  data_[name] = t;
  io::TensorInfo info;
  info.name = name;
  info.dtype = io::safetensors_dtype(t.dtype());
  info.shape = t.shape();
  info.nbytes = t.nbytes();
  info.file = path_;
  infos_.push_back(info);
}

Tensor MemoryModel::load(const std::string& name) const {
  auto it = data_.find(name);
  if (it == data_.end()) throw Error("'" + path_ + "': no tensor named '" + name + "'");
  return it->second.dtype() == DType::F32 ? it->second : it->second.to_f32();
}

Tensor MemoryModel::load_raw(const std::string& name) const {
  auto it = data_.find(name);
  if (it == data_.end()) throw Error("'" + path_ + "': no tensor named '" + name + "'");
  return it->second;
}

Layout parse_layout(std::string_view s) {
  if (s == "native" || s == "castscope") return Layout::Native;
  if (s == "gpt-oss" || s == "gptoss") return Layout::GptOss;
  if (s == "compressed-tensors" || s == "ct") return Layout::CompressedTensors;
  if (s == "gguf") return Layout::GGUF;
  throw Error("export layout '" + std::string(s) +
              "': expected native, gpt-oss, compressed-tensors or gguf");
}

const char* to_string(Layout l) {
  switch (l) {
    case Layout::Native:
      return "native";
    case Layout::GptOss:
      return "gpt-oss";
    case Layout::CompressedTensors:
      return "compressed-tensors";
    case Layout::GGUF:
      return "gguf";
  }
  return "?";
}

namespace exportdetail {

ExportReport export_layout(const io::Model& model, const std::string& out, const ExportPlan& plan,
                           const ExportOptions& options, JobControl* job) {
  ExportReport r;
  if (options.layout != Layout::Native)
    for (size_t i = 0; i < plan.rules.size(); ++i)
      if (plan.rules[i].rotate.enabled() && plan.rules[i].target)
        throw Error("plan '" + plan.source + "': rule " + std::to_string(i) + " ('" +
                    plan.rules[i].pattern + "') rotates by " + plan.rules[i].rotate.str() +
                    ", which the " + to_string(options.layout) +
                    " layout cannot store; export rotated weights with --layout native");
  switch (options.layout) {
    case Layout::Native:
      r = exportdetail::export_native(model, out, plan, options, job);
      break;
    case Layout::GptOss:
      r = exportdetail::export_gpt_oss(model, out, plan, options, job);
      break;
    case Layout::CompressedTensors:
      r = exportdetail::export_compressed_tensors(model, out, plan, options, job);
      break;
    case Layout::GGUF:
      r = exportdetail::export_gguf(model, out, plan, options, job);
      break;
  }
  for (const ExportedTensor& t : r.tensors) {
    r.bytes_in += t.bytes_in;
    r.bytes_out += t.bytes_out;
  }
  if (job) job->report(1.0);
  return r;
}

}  // namespace exportdetail
}  // namespace castscope

namespace castscope::exportdetail {

CastOptions cast_options(const ExportOptions& o, CastMode mode, JobControl* sub) {
  CastOptions c = o.cast;
  c.mode = mode;
  c.job = sub;
  // Rotations come from the plan's rules only (export_native sets them and records them); a
  // layout without rotation metadata must never receive rotated codes.
  c.rotate = Rotation{};
  return c;
}

CastOptions cast_options(const ExportOptions& o, CastMode mode, JobControl* sub,
                         const ExportPlan& plan, const io::TensorInfo& info) {
  CastOptions c = cast_options(o, mode, sub);
  if (const std::optional<AxisSpec> a = plan.axis_for(info)) a->apply(c);
  // Importance weights go to the tensors cast to ggml's block formats, the only ones that take
  // them (a kept tensor's entry is never looked at, as in llama-quantize).
  if (o.imatrix)
    if (const std::optional<DataType> d = plan.dtype_for(info);
        d && family_traits(d->family()).gguf_blocks)
      c.importance = o.imatrix->weights_for(info.name, info.shape);
  // The stacks of these layouts fix the axis: ggml quantizes rows; transformers' gpt-oss experts
  // [E, in, out] reduce over axis -2, and other tensors of that layout over their last axis.
  if (o.layout == Layout::GGUF && c.axis_auto) {
    // A layout that reduces elsewhere (MatMul's B [K, N], a Keras kernel) would be quantized
    // across its outputs: refused, unless an axis is named.
    const CastOptions want = io::cast_options_for(c, info);
    const int r = static_cast<int>(info.shape.size());
    // Only a tensor the plan casts: a kept one is written as stored, whatever its layout.
    if (r >= 2 && !info.layout.guessed && plan.dtype_for(info) &&
        (want.lead || (!want.flatten && want.axis != -1 && want.axis != r - 1)))
      throw Error("GGUF holds blocks along the last axis (ggml's rows); this tensor's layout '" +
                  info.layout.layout + "' reduces over axis " + describe_axis(want, info.shape) +
                  " (" + info.layout.reason +
                  "): keep it, or name an axis (--axis -1) to cast it along its rows anyway");
    AxisSpec{}.apply(c);
  }
  if (o.layout == Layout::GptOss && c.axis_auto) {
    // The layout reads experts [E, in, out] along axis -2 and everything else along its last
    // axis: a tensor whose file shows another reduction (MatMul's B [K, N], experts stored
    // [E, out, in]) would be quantized across its outputs, so it is refused.
    const int r = static_cast<int>(info.shape.size());
    const int fixed = r == 3 ? 1 : r - 1;
    const CastOptions want = io::cast_options_for(c, info);
    if (r >= 2 && !info.layout.guessed && plan.dtype_for(info) &&
        (want.flatten || ((want.axis % r) + r) % r != fixed))
      throw Error("the gpt-oss layout holds blocks along " +
                  std::string(r == 3 ? "axis -2 of experts [E, in, out]" : "the last axis") +
                  "; this tensor's layout '" + info.layout.layout + "' reduces over axis " +
                  describe_axis(want, info.shape) + " (" + info.layout.reason +
                  "): keep it, or name an axis to cast it that way anyway");
    AxisSpec{false, r == 3 ? -2 : -1, false}.apply(c);
  }
  // Otherwise an automatic axis is the tensor's resolved layout.
  return io::cast_options_for(c, info);
}

Tensor load_for_export(const io::Model& model, const std::string& name, bool kept) {
  Tensor x;
  if (kept) {
    try {
      x = model.load_raw(name);
    } catch (const Error&) {
    }
  }
  if (!x.defined()) x = model.load(name);
  return x;
}

void with_tensor_context(const io::Model& model, const std::string& name,
                         const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Cancelled&) {
    throw;
  } catch (const Error& e) {
    throw Error("tensor '" + name + "' of '" + model.path() + "': " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error("tensor '" + name + "' of '" + model.path() + "': out of memory");
  }
}

void for_each_tensor(const io::Model& model, const ExportPlan& plan, JobControl* job,
                     const TensorFn& fn) {
  const auto& infos = model.tensors();
  double total = 0;
  for (const io::TensorInfo& i : infos)
    total += static_cast<double>(std::max<uint64_t>(i.nbytes, 1));
  double done = 0;
  for (const io::TensorInfo& info : infos) {
    if (job) job->check();
    const double w =
        static_cast<double>(std::max<uint64_t>(info.nbytes, 1)) / (total > 0 ? total : 1);
    SubJob sub(job, 0.95 * done, 0.95 * w);
    with_tensor_context(model, info.name, [&] {
      const std::optional<DataType> d = plan.dtype_for(info);
      fn(info, d, load_for_export(model, info.name, !d), job ? &sub.inner : nullptr);
    });
    io::release_pages(model, info.name);
    if (job && sub.inner.cancel.load()) throw Cancelled();
    done += w;
    if (job) job->report(0.95 * done);
  }
}

void for_each_routed(const io::Model& model, const ExportPlan& plan, JobControl* job,
                     OutputFiles& w, ExportReport& rep, const CastFn& cast, const KeepFn& keep) {
  for_each_tensor(model, plan, job,
                  [&](const io::TensorInfo& info, const std::optional<DataType>& d, const Tensor& x,
                      JobControl* sub) {
                    ExportedTensor et{info.name, "", info.shape, info.nbytes, 0, ""};
                    w.route(info);
                    if (d)
                      cast(info, *d, x, sub, et);
                    else if (keep)
                      keep(info, x, sub, et);
                    else
                      keep_tensor(w, info, x, et);
                    rep.tensors.push_back(et);
                  });
}

}  // namespace castscope::exportdetail
