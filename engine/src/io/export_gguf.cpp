// GGUF (ggml / llama.cpp) version 3: F32 / F16 / BF16 tensors, Q8_0 blocks (fp16 scale + 32
// int8) and MXFP4 blocks (E8M0 exponent + 16 bytes; byte j holds element j in its low nibble and
// element j + 16 in its high nibble, ggml's order). Tensor data is aligned to 32 bytes. A model
// read from a GGUF file keeps its key-values and tensor order, and the tensors the plan keeps
// are copied in their source type, so llama.cpp can still load the result.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "castscope/export.hpp"
#include "families/ggml/ggml_types.hpp"
#include "io/reader.hpp"

namespace castscope {
namespace exportdetail {
namespace {

constexpr uint32_t kAlign = 32;
enum GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q8_0 = 8,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  MXFP4 = 39
};

const char* type_name(uint32_t t) {
  const ggml::TypeInfo* ti = ggml::type_info(t);
  return ti ? ti->name : "?";
}

bool is_q8_0(const DataType& d) {
  if (!family_traits(d.family()).grammar || !d.scaled() || d.number().name() != "int8")
    return false;
  const ScaleSpec& s = *d.scale();
  return s.scale.name() == "float16" && !s.second && s.tiles.size() == 1 && s.tiles[0].size == 32 &&
         !s.tiles[0].sub && !s.tiles[0].sparse();
}

struct Planned {
  const io::TensorInfo* info;
  std::optional<DataType> dtype;
  uint32_t type;
  uint64_t offset, size;
  uint32_t crc = 0;
  const io::detail::GgufTensor* copy = nullptr;  // kept tensor copied from the source GGUF
  CastOptions co = {};                           // its cast (axis resolved), job set per write
};

uint64_t type_size(uint32_t type, int64_t n) {
  if (const ggml::TypeInfo* t = ggml::type_info(type); t && t->block > 1)
    return ggml::row_bytes(*t, static_cast<uint64_t>(n));
  switch (type) {
    case F16:
    case BF16:
    case I16:
      return 2 * static_cast<uint64_t>(n);
    case Q8_0:
      return static_cast<uint64_t>(n) / 32 * 34;
    case MXFP4:
      return static_cast<uint64_t>(n) / 32 * 17;
    case I8:
      return static_cast<uint64_t>(n);
    case I64:
    case F64:
      return 8 * static_cast<uint64_t>(n);
    default:
      return 4 * static_cast<uint64_t>(n);
  }
}

uint32_t choose_type(const io::TensorInfo& info, const std::optional<DataType>& d,
                     const CastOptions& co) {
  if (!d) {
    switch (stored_dtype(info)) {
      case DType::F16:
        return F16;
      case DType::BF16:
        return BF16;
      case DType::F64:
        return F64;
      case DType::I8:
        return I8;
      case DType::I16:
        return I16;
      case DType::I32:
        return I32;
      case DType::I64:
        return I64;
      default:
        return F32;
    }
  }
  const std::string s = d->str();
  if (family_traits(d->family()).gguf_blocks) {  // ggml's block formats are GGUF types of their own
    const ggml::TypeInfo& t = *ggml::type_info(d->ggml_type());
    if (info.shape.empty() || info.shape.back() % t.block != 0 || !axis_is_last(co, info.shape))
      throw Error(std::string(t.name) + " needs " + std::to_string(t.block) +
                  "-element blocks along the last axis; shape " + shape_str(info.shape) +
                  " does not tile");
    return t.id;
  }
  if (s == "float16") return F16;
  if (s == "bfloat16") return BF16;
  if (s == "float32") return F32;
  const bool q8 = is_q8_0(*d), mx = is_mxfp4(*d);
  if (!q8 && !mx)
    throw Error(
        "the gguf layout holds float16, bfloat16, float32, int8_float16_t32 (Q8_0), mxfp4e2 "
        "(MXFP4) and ggml's block formats (q4_0 ... q8_0, q2_k ... q6_k, iq4_nl, iq4_xs, tq1_0, "
        "tq2_0); the plan maps it to " +
        s);
  if (info.shape.empty() || info.shape.back() % 32 != 0 || !axis_is_last(co, info.shape))
    throw Error(std::string(q8 ? "Q8_0" : "MXFP4") +
                " needs 32-element blocks along the last axis; shape " + shape_str(info.shape) +
                " does not tile");
  return q8 ? Q8_0 : MXFP4;
}

// llama.cpp's LLAMA_FTYPE (llama.h) for a file whose dominant type is `t`: the mapping its model
// loader uses when a file has no general.file_type (K-quants as their _M mixes, MXFP4 as
// MOSTLY_MXFP4_MOE); nullopt for a type without one.
std::optional<uint32_t> llama_ftype(uint32_t t) {
  switch (t) {
    case F32:
      return 0;
    case F16:
      return 1;
    case 2:  // Q4_0
      return 2;
    case 3:  // Q4_1
      return 3;
    case Q8_0:
      return 7;
    case 6:  // Q5_0
      return 8;
    case 7:  // Q5_1
      return 9;
    case 10:  // Q2_K
      return 10;
    case 11:  // Q3_K -> Q3_K_M
      return 12;
    case 12:  // Q4_K -> Q4_K_M
      return 15;
    case 13:  // Q5_K -> Q5_K_M
      return 17;
    case 14:  // Q6_K
      return 18;
    case 16:  // IQ2_XXS
      return 19;
    case 17:  // IQ2_XS
      return 20;
    case 18:  // IQ3_XXS
      return 23;
    case 19:  // IQ1_S
      return 24;
    case 20:  // IQ4_NL
      return 25;
    case 21:  // IQ3_S
      return 26;
    case 22:  // IQ2_S
      return 28;
    case 23:  // IQ4_XS
      return 30;
    case 29:  // IQ1_M
      return 31;
    case BF16:
      return 32;
    case 34:  // TQ1_0
      return 36;
    case 35:  // TQ2_0
      return 37;
    case MXFP4:
      return 38;
    case 40:  // NVFP4
      return 39;
    case 41:  // Q1_0
      return 40;
    case 42:  // Q2_0
      return 41;
    default:
      return std::nullopt;
  }
}

// llama.cpp's names of its file types (llama-quantize's QUANT_OPTIONS, LLAMA_FTYPE_MOSTLY_*).
constexpr std::pair<const char*, uint32_t> kFtypeNames[] = {
    {"F32", 0},      {"F16", 1},      {"Q4_0", 2},       {"Q4_1", 3},    {"Q8_0", 7},
    {"Q5_0", 8},     {"Q5_1", 9},     {"Q2_K", 10},      {"Q3_K_S", 11}, {"Q3_K_M", 12},
    {"Q3_K_L", 13},  {"Q4_K_S", 14},  {"Q4_K_M", 15},    {"Q5_K_S", 16}, {"Q5_K_M", 17},
    {"Q6_K", 18},    {"IQ2_XXS", 19}, {"IQ2_XS", 20},    {"Q2_K_S", 21}, {"IQ3_XS", 22},
    {"IQ3_XXS", 23}, {"IQ1_S", 24},   {"IQ4_NL", 25},    {"IQ3_S", 26},  {"IQ3_M", 27},
    {"IQ2_S", 28},   {"IQ2_M", 29},   {"IQ4_XS", 30},    {"IQ1_M", 31},  {"BF16", 32},
    {"TQ1_0", 36},   {"TQ2_0", 37},   {"MXFP4_MOE", 38}, {"NVFP4", 39},  {"Q1_0", 40},
    {"Q2_0", 41},    {"Q3_K", 12},    {"Q4_K", 15},      {"Q5_K", 17}};

uint32_t ftype_by_name(const std::string& name) {
  for (const auto& [n, v] : kFtypeNames)
    if (name == n) return v;
  std::string known;
  for (const auto& [n, v] : kFtypeNames) known += std::string(known.empty() ? "" : ", ") + n;
  throw Error("'" + name + "' is not one of llama.cpp's file types (" + known + ")");
}

// The tensors llama.cpp's mixes treat apart (their type follows --output-tensor-type and
// --token-embedding-type, not the mix).
bool mix_exempt(const std::string& name) {
  return name == "output.weight" || name.rfind("token_embd.", 0) == 0;
}

// general.file_type of the written file: the quantized (block) type holding the most elements,
// or without one the float type holding the most (F32, F16, BF16); the first on a tie.
std::optional<uint32_t> file_type(const std::vector<Planned>& planned) {
  std::vector<std::pair<uint32_t, uint64_t>> count;  // first-seen order
  auto add = [&](uint32_t t, uint64_t n) {
    for (auto& [k, v] : count)
      if (k == t) return void(v += n);
    count.push_back({t, n});
  };
  for (const Planned& p : planned) add(p.type, static_cast<uint64_t>(numel(p.info->shape)));
  for (const bool blocks : {true, false}) {
    std::optional<uint32_t> best;
    uint64_t most = 0;
    for (const auto& [t, n] : count) {
      const ggml::TypeInfo* ti = ggml::type_info(t);
      const bool block = ti && ti->block > 1;
      const bool plain_float = t == F32 || t == F16 || t == BF16;
      if ((blocks ? block : plain_float) && n > most) best = t, most = n;
    }
    if (!best) continue;
    // Q4_K_S and Q4_K_M differ where llama.cpp gives more bits: Q4_K_M's attn_v / ffn_down go to
    // Q6_K, Q4_K_S's to Q5_K. A Q4_K file with Q5_K there and no Q6_K is named Q4_K_S.
    if (*best == 12) {
      bool q5 = false, q6 = false;
      for (const Planned& p : planned) {
        if (mix_exempt(p.info->name)) continue;
        q5 |= p.type == 13;
        q6 |= p.type == 14;
      }
      if (q5 && !q6) return 14;
    }
    return llama_ftype(*best);
  }
  return std::nullopt;
}

class Buf {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void kv_str(const std::string& k, const std::string& v) {
    str(k);
    u32(8);  // GGUF_TYPE_STRING
    str(v);
  }
  void kv_u32(const std::string& k, uint32_t v) {
    str(k);
    u32(4);  // GGUF_TYPE_UINT32
    u32(v);
  }
  void raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  }
  std::vector<char> b;
};

Tensor encode(const Planned& p, const Tensor& x, JobControl* sub, const ExportPlan& plan,
              const ExportOptions& opt) {
  if (!p.dtype) {
    const DType sd = p.type == F16    ? DType::F16
                     : p.type == BF16 ? DType::BF16
                     : p.type == F64  ? DType::F64
                     : p.type == I8   ? DType::I8
                     : p.type == I16  ? DType::I16
                     : p.type == I32  ? DType::I32
                     : p.type == I64  ? DType::I64
                                      : DType::F32;
    return to_storage(x, sd);
  }
  CastOptions co = p.co;
  co.job = sub;
  const CastResult r = method_cast(*p.info, *p.dtype, x, co, plan, opt);
  if (p.type == F16 || p.type == BF16 || p.type == F32) return r.codes;
  if (family_traits(p.dtype->family()).gguf_blocks) return r.codes.reshaped({r.codes.numel()});
  const int64_t blocks = x.numel() / 32;
  Tensor out = Tensor::empty(DType::U8, {static_cast<int64_t>(p.size)});
  uint8_t* o = out.mutable_ptr<uint8_t>();
  const uint8_t* c = static_cast<const uint8_t*>(r.codes.data());
  const uint8_t* s = static_cast<const uint8_t*>(r.scale.data());
  const bool fnuz = p.dtype->number().infnan() == InfNan::FNUZ;
  for (int64_t b = 0; b < blocks; ++b) {
    if (p.type == Q8_0) {
      std::memcpy(o + b * 34, s + 2 * b, 2);  // fp16 scale code
      std::memcpy(o + b * 34 + 2, c + 32 * b, 32);
    } else {
      uint8_t* blk = o + b * 17;
      blk[0] = s[b];
      for (int j = 0; j < 16; ++j) {
        const uint8_t lo = c[32 * b + j] & 0xF, hi = c[32 * b + 16 + j] & 0xF;
        if (fnuz && (lo == 0x8 || hi == 0x8))
          throw Error("an e2m1fnuz NaN code cannot be stored as OCP E2M1");
        blk[1 + j] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  return out;
}

void verify_gguf(const std::string& path, const std::vector<char>& header,
                 const std::vector<Planned>& plan, uint64_t data_start, JobControl* job) {
  const VerifyReader file(path);
  auto read_at = [&](void* dst, size_t n, uint64_t off) { file.read_at(dst, n, off); };
  std::vector<char> h(header.size());
  read_at(h.data(), h.size(), 0);
  if (h != header) throw Error("verifying '" + path + "': header read back differs");
  std::vector<char> buf(8u << 20);
  for (const Planned& p : plan) {
    if (job) job->check();
    uint32_t crc = 0;
    for (uint64_t off = 0; off < p.size;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), p.size - off));
      read_at(buf.data(), n, data_start + p.offset + off);
      crc = crc32_of(buf.data(), n, crc);
      off += n;
    }
    if (crc != p.crc)
      throw Error("verifying '" + path + "': tensor '" + p.info->name +
                  "' data read back differs (CRC-32)");
  }
}

}  // namespace

// The source GGUF of a model read from one GGUF file: its key-values are carried over and its
// kept tensors copied byte for byte in their own ggml type.
std::optional<io::detail::GgufHeader> source_gguf(const io::Model& model) {
  if (model.format() != "gguf" || model.tensors().empty()) return std::nullopt;
  const std::string& file = model.tensors().front().file;
  for (const io::TensorInfo& i : model.tensors())
    if (i.file != file) return std::nullopt;  // a directory of several GGUF files
  return io::detail::parse_gguf(file);
}

ExportReport export_gguf(const io::Model& model, const std::string& out, const ExportPlan& plan,
                         const ExportOptions& opt, JobControl* job) {
  const std::optional<io::detail::GgufHeader> src = source_gguf(model);
  std::map<std::string, const io::detail::GgufTensor*> src_tensor;
  if (src)
    for (const io::detail::GgufTensor& t : src->tensors) src_tensor[t.name] = &t;
  // Every tensor's GGUF type and size follow from the plan and its shape, so the header is
  // complete before any tensor is loaded.
  std::vector<Planned> planned;
  uint64_t off = 0;
  for (const io::TensorInfo& info : model.tensors()) {
    try {
      if (info.name.size() >= 64) throw Error("GGUF tensor names are limited to 63 bytes");
      Planned p{&info, plan.dtype_for(info), 0, 0, 0, 0, nullptr};
      // A 1-D tensor (norm, bias) that the plan casts is written float32, as llama.cpp's
      // converter writes them and its kernels need them (an F16 / BF16 / block norm aborts its
      // binary ops); llama-quantize never casts them. Kept ones keep their stored type, and a
      // GGUF source's are copied as they are.
      const bool to_f32 = info.shape.size() <= 1 && p.dtype && p.dtype->str() != "float32";
      if (to_f32) p.dtype.reset();
      const auto st = src_tensor.find(info.name);
      if (!p.dtype && st != src_tensor.end()) {
        if (!st->second->type)
          throw Error("ggml type " + std::to_string(st->second->type_id) +
                      " is unknown, so the tensor cannot be copied");
        p.copy = st->second;
        p.type = st->second->type_id;
        p.size = st->second->nbytes;
      } else {
        p.co = cast_options(opt, CastMode::Actual, nullptr, plan, info);
        p.type = choose_type(info, p.dtype, p.co);
        if (to_f32) p.type = F32;
        p.size = type_size(p.type, numel(info.shape));
      }
      p.offset = off;
      off += (p.size + kAlign - 1) / kAlign * kAlign;
      planned.push_back(p);
    } catch (const Error& e) {
      throw Error("tensor '" + info.name + "' of '" + model.path() + "': " + e.what());
    }
  }
  Buf h;
  h.raw("GGUF", 4);
  h.u32(3);
  h.u64(planned.size());
  // The source's key-values first, in their order and byte for byte; CastScope's keys of an
  // earlier export are replaced, and so are the alignment (the one this writer uses) and the
  // file type (the written file's, which llama.cpp reports as the model's quantization).
  const std::optional<uint32_t> ftype =
      opt.gguf_file_type.empty() ? file_type(planned) : ftype_by_name(opt.gguf_file_type);
  struct KeptKv {
    uint64_t begin, end;
    const char* put_u32;  // written in place as this key with a new value
    uint32_t value;
  };
  std::vector<KeptKv> kept_kv;
  bool has_name = false, has_alignment = false, has_ftype = false;
  if (src)
    for (const io::detail::GgufKv& kv : src->kvs) {
      if (kv.key.rfind("castscope.", 0) == 0) continue;
      if (opt.imatrix && kv.key.rfind("quantize.imatrix.", 0) == 0) continue;
      has_name |= kv.key == "general.name";
      if (kv.key == "general.alignment") {
        has_alignment = true;
        kept_kv.push_back({0, 0, "general.alignment", kAlign});
      } else if (kv.key == "general.file_type") {
        has_ftype = true;
        if (ftype) kept_kv.push_back({0, 0, "general.file_type", *ftype});
      } else {
        kept_kv.push_back({kv.begin, kv.end, nullptr, 0});
      }
    }
  std::vector<std::pair<std::string, std::string>> kv;
  if (!has_name) kv.push_back({"general.name", "castscope export"});
  kv.push_back({"castscope.version", "1"});
  kv.push_back({"castscope.source", model.path()});
  for (const auto& [k, v] : opt.metadata) kv.push_back({k, v});
  for (const Planned& p : planned)
    if (p.dtype) kv.push_back({"castscope.dtype." + p.info->name, p.dtype->str()});
  // The importance matrix as llama-quantize records it.
  std::vector<std::pair<std::string, uint32_t>> kv_u32;
  if (opt.imatrix) {
    kv.push_back({"quantize.imatrix.file", opt.imatrix_file});
    if (!opt.imatrix->datasets.empty())
      kv.push_back({"quantize.imatrix.dataset", opt.imatrix->datasets.front()});
    kv_u32.push_back(
        {"quantize.imatrix.entries_count", static_cast<uint32_t>(opt.imatrix->entries.size())});
    if (opt.imatrix->chunk_count > 0)
      kv_u32.push_back(
          {"quantize.imatrix.chunks_count", static_cast<uint32_t>(opt.imatrix->chunk_count)});
  }
  const bool add_ftype = ftype && !has_ftype;
  h.u64(kept_kv.size() + kv.size() + kv_u32.size() + (has_alignment ? 0 : 1) + (add_ftype ? 1 : 0));
  if (!has_alignment) h.kv_u32("general.alignment", kAlign);
  if (add_ftype) h.kv_u32("general.file_type", *ftype);
  for (const KeptKv& k : kept_kv) {
    if (k.put_u32)
      h.kv_u32(k.put_u32, k.value);
    else
      h.raw(src->map->data() + k.begin, k.end - k.begin);
  }
  for (const auto& [k, v] : kv) h.kv_str(k, v);
  for (const auto& [k, v] : kv_u32) h.kv_u32(k, v);
  for (const Planned& p : planned) {
    h.str(p.info->name);
    h.u32(static_cast<uint32_t>(p.info->shape.size()));
    for (auto it = p.info->shape.rbegin(); it != p.info->shape.rend(); ++it)
      h.u64(static_cast<uint64_t>(*it));
    h.u32(p.type);
    h.u64(p.offset);
  }
  while (h.b.size() % kAlign) h.b.push_back(0);
  const uint64_t data_start = h.b.size();
  ExportReport rep;
  commit_verified(
      out,
      [&](const auto& put) {
        put(h.b.data(), h.b.size());
        const char zeros[kAlign] = {};
        double total = 0, done = 0;
        for (const Planned& p : planned)
          total += static_cast<double>(std::max<uint64_t>(p.size, 1));
        for (Planned& p : planned) {
          const io::TensorInfo& info = *p.info;
          if (job) job->check();
          const double w = static_cast<double>(std::max<uint64_t>(p.size, 1)) / total;
          SubJob sub(job, 0.95 * done, 0.95 * w);
          with_tensor_context(model, info.name, [&] {
            if (p.copy) {  // kept: the source bytes in the source's ggml type
              const uint8_t* bytes = src->map->data() + src->data_start + p.copy->offset;
              p.crc = crc32_of(bytes, p.size);
              put(bytes, p.size);
              return;
            }
            const Tensor x = load_for_export(model, info.name, !p.dtype);
            const Tensor t = encode(p, x, job ? &sub.inner : nullptr, plan, opt);
            if (t.nbytes() != p.size)
              throw Error("encoded size " + std::to_string(t.nbytes()) +
                          " differs from the planned " + std::to_string(p.size));
            p.crc = crc32_of(t.data(), t.nbytes());
            put(t.data(), t.nbytes());
          });
          const uint64_t pad = (kAlign - p.size % kAlign) % kAlign;
          if (pad) put(zeros, pad);
          io::release_pages(model, info.name);
          if (job && sub.inner.cancel.load()) throw Cancelled();
          done += w;
          if (job) job->report(0.95 * done);
          rep.tensors.push_back(
              {info.name, p.dtype ? p.dtype->str() : std::string("keep:") + type_name(p.type),
               info.shape, info.nbytes, p.size,
               p.dtype ? describe_axis(p.co, info.shape) : std::string()});
        }
      },
      [&](const std::string& staged) { verify_gguf(staged, h.b, planned, data_start, job); });
  rep.files.push_back(out);
  return rep;
}

}  // namespace exportdetail
}  // namespace castscope
