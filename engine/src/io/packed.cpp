#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "castscope/io.hpp"
#include "io/json_fields.hpp"
#include "io/packed_dense.hpp"
#include "io/reader.hpp"

namespace castscope::io {
namespace {

// The newest layout this reader knows: 4 packs narrow values densely.
constexpr int kPackedVersion = 4;

using nlohmann::json;

struct StDType {
  const char* name;
  DType dtype;
};
constexpr StDType kSt[] = {
    {"F32", DType::F32}, {"F16", DType::F16},        {"BF16", DType::BF16},
    {"F64", DType::F64}, {"F8_E4M3", DType::F8E4M3}, {"F8_E5M2", DType::F8E5M2},
    {"U8", DType::U8},   {"I8", DType::I8},          {"U16", DType::U16},
    {"I16", DType::I16}, {"U32", DType::U32},        {"I32", DType::I32},
    {"U64", DType::U64}, {"I64", DType::I64},        {"BOOL", DType::Bool},
};

// The parts of a stored cast must have exactly the dtypes and shapes that the cast produces, or
// upcast would read past them. The reference layout comes from casting zeros of the stored shape
// with the stored options, after bounding that shape by the size of the stored codes.
CastResult reference_layout(const std::string& path, const PackedTensor& pt, uint64_t code_bytes) {
  const CastResult& r = pt.result;
  const std::string at = "'" + path + "': tensor '" + pt.name + "': ";
  const uint64_t n = detail::checked_numel(r.shape, path, pt.name);
  // No code takes less than 1/64 of a byte, even with N:M sparsity.
  if (n == 0 || n / 64 > code_bytes)
    throw Error(at + "shape " + shape_str(r.shape) + " does not match its " +
                std::to_string(code_bytes) + " bytes of codes");
  CastOptions o = r.options;
  o.mode = r.mode;
  o.device = Device::CPU;
  o.job = nullptr;
  try {
    return cast(Tensor::empty(DType::F32, r.shape), r.dtype, o);
  } catch (const Error& e) {
    throw Error(at + "datatype " + r.dtype.str() + " does not apply to shape " +
                shape_str(r.shape) + ": " + e.what());
  }
}

void check_layout(const std::string& path, const PackedTensor& pt, const CastResult& ref) {
  const CastResult& r = pt.result;
  const std::string at = "'" + path + "': tensor '" + pt.name + "': ";
  for (const PackedPart& part : packed_parts()) {
    const Tensor& want = ref.*(part.member);
    const Tensor& got = r.*(part.member);
    const std::string what = std::string("'") + pt.name + part.suffix + "'";
    if (!want && !got) continue;
    if (!got) throw Error(at + "missing part " + what);
    if (!want) throw Error(at + "unexpected part " + what + " for datatype " + r.dtype.str());
    if (want.dtype() != got.dtype() || want.shape() != got.shape())
      throw Error(at + "part " + what + " is " + dtype_name(got.dtype()) + " " +
                  shape_str(got.shape()) + ", expected " + dtype_name(want.dtype()) + " " +
                  shape_str(want.shape()));
  }
}

// One part's entry in the header, its bytes still in the file.
struct RawPart {
  const PackedPart* part = nullptr;
  std::string key;
  DType dtype = DType::U8;
  Shape shape;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

// The layout version of a file: files before versions were numbered are 1.
int file_version(const std::string& path, const nlohmann::json& meta) {
  if (!meta.contains("castscope.version")) return 1;
  const nlohmann::json& v = meta["castscope.version"];
  if (!v.is_string()) throw Error("'" + path + "': __metadata__ castscope.version is not a string");
  const int64_t n = detail::text_integer(v.get<std::string>(), path,
                                         "__metadata__ castscope.version", 1, 1 << 20);
  if (n > kPackedVersion)
    throw Error("'" + path + "': packed layout version " + std::to_string(n) +
                " is newer than this CastScope reads (up to " + std::to_string(kPackedVersion) +
                ")");
  return static_cast<int>(n);
}

}  // namespace

const std::vector<PackedPart>& packed_parts() {
  static const std::vector<PackedPart> parts = {
      {"", &CastResult::codes},
      {".scale", &CastResult::scale},
      {".zero", &CastResult::zero},
      {".tenscale", &CastResult::tenscale},
      {".meta", &CastResult::meta},
      {".mask", &CastResult::mask},
      {".residual", &CastResult::residual},
      {".residual_scale", &CastResult::residual_scale},
  };
  return parts;
}

const char* safetensors_dtype(DType d) {
  for (const StDType& s : kSt)
    if (s.dtype == d) return s.name;
  return "U8";
}

DType parse_safetensors_dtype(const std::string& s) {
  for (const StDType& t : kSt)
    if (s == t.name) return t.dtype;
  throw Error("unsupported safetensors dtype '" + s + "'");
}

std::vector<std::pair<std::string, std::string>> packed_tensor_metadata(const std::string& name,
                                                                        const CastResult& r) {
  std::vector<std::pair<std::string, std::string>> m = {
      {name + ".dtype", r.dtype.str()},
      {name + ".shape", json(r.shape).dump()},
      {name + ".mode", to_string(r.mode)},
      {name + ".axis", std::to_string(r.options.axis)},
      {name + ".round", to_string(r.options.round)},
      {name + ".scale_mode", to_string(r.options.scale_mode)},
      {name + ".overflow", to_string(r.options.overflow)},
      {name + ".seed", std::to_string(r.options.seed)}};
  if (const auto& cb = r.dtype.codebook(); cb && !cb->implicit)
    m.push_back(
        {name + ".codebook",
         json{{"codebook", cb->str()}, {"mappings", cb->maps}, {"names", cb->names}}.dump()});
  if (r.options.rotate.enabled()) m.push_back({name + ".rotate", r.options.rotate.str()});
  if (r.options.flatten) m.push_back({name + ".flatten", r.options.lead ? "lead" : "true"});
  return m;
}

int packed_version(const CastResult& r) {
  return r.options.lead ? 4 : r.options.flatten ? 3 : r.options.rotate.enabled() ? 2 : 1;
}

std::vector<std::pair<std::string, Tensor>> packed_file_tensors(const std::string& name,
                                                                const CastResult& r, int& version) {
  version = std::max(version, packed_version(r));
  const std::vector<detail::DenseField> dense = detail::dense_fields(r);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const PackedPart& part : packed_parts()) {
    const Tensor& t = r.*(part.member);
    if (!t) continue;
    Tensor stored = t;
    for (const detail::DenseField& f : dense)
      if (f.member == part.member && detail::dense_differs(f)) {
        stored = detail::to_dense(f, t);
        version = std::max(version, 4);
      }
    out.emplace_back(name + part.suffix, stored);
  }
  return out;
}

void save_packed(const std::string& path, const std::vector<PackedTensor>& tensors,
                 const std::vector<std::pair<std::string, std::string>>& extra_metadata,
                 const std::string& shown) {
  json header = json::object();
  json meta = json::object();
  meta["format"] = "castscope-packed";
  for (const auto& [k, v] : extra_metadata) meta[k] = v;
  int version = 1;
  std::vector<Tensor> order;
  uint64_t offset = 0;
  for (const PackedTensor& pt : tensors) {
    const CastResult& r = pt.result;
    if (r.mode == CastMode::Virtual)
      throw Error("tensor '" + pt.name + "': a virtual cast has no codes to pack");
    for (const auto& [k, v] : packed_tensor_metadata(pt.name, r)) meta[k] = v;
    for (auto& [key, t] : packed_file_tensors(pt.name, r, version)) {
      if (header.contains(key)) throw Error("duplicate tensor name '" + key + "' in packed export");
      header[key] = {{"dtype", safetensors_dtype(t.dtype())},
                     {"shape", t.shape()},
                     {"data_offsets", {offset, offset + t.nbytes()}}};
      offset += t.nbytes();
      order.push_back(t);
    }
  }
  meta["castscope.version"] = std::to_string(version);
  header["__metadata__"] = meta;
  std::string hs = header.dump();
  while (hs.size() % 8) hs += ' ';
  write_atomically(
      path,
      [&](const auto& put) {
        uint64_t n = hs.size();
        uint8_t len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
        put(len, 8);
        put(hs.data(), hs.size());
        for (const Tensor& t : order) put(t.data(), t.nbytes());
      },
      shown.empty() ? path : shown);
}

std::vector<PackedTensor> load_packed(const std::string& path) {
  auto map = detail::MappedFile::open(path);
  const uint64_t size = map->size();
  if (size < 8) throw Error("'" + path + "': too short for a safetensors file");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(map->data()[i]) << (8 * i);
  if (hl > size - 8 || hl > (100u << 20))
    throw Error("'" + path + "': header length " + std::to_string(hl) +
                " runs past the end of the file");
  json header;
  try {
    header = json::parse(map->data() + 8, map->data() + 8 + hl);
  } catch (const json::exception& e) {
    throw Error("'" + path + "': header is not valid JSON (" + e.what() + ")");
  }
  const uint64_t data_start = 8 + hl;
  if (!header.is_object() || !header.contains("__metadata__") ||
      !header["__metadata__"].is_object() || !header["__metadata__"].contains("format") ||
      header["__metadata__"]["format"] != "castscope-packed")
    throw Error("'" + path +
                "' is not a CastScope packed file (no __metadata__.format = castscope-packed)");
  const json& meta = header["__metadata__"];
  const int version = file_version(path, meta);
  std::vector<PackedTensor> out;
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    const std::string& key = it.key();
    if (key.size() < 7 || key.compare(key.size() - 6, 6, ".dtype") != 0) continue;
    const std::string name = key.substr(0, key.size() - 6);
    auto get = [&](const std::string& k) -> std::string {
      if (!meta.contains(name + k)) throw Error("no " + k.substr(1) + " in __metadata__");
      const json& v = meta[name + k];
      if (!v.is_string()) throw Error("__metadata__ " + name + k + " is not a string");
      return v.get<std::string>();
    };
    PackedTensor pt;
    pt.name = name;
    CastResult& r = pt.result;
    try {
      // A generic codebook's tables travel with the file; implicit ones follow from the string.
      if (meta.contains(name + ".codebook")) {
        const json t = json::parse(get(".codebook"));
        register_codebook(t.at("codebook").get<std::string>(),
                          t.at("mappings").get<std::vector<std::vector<double>>>(),
                          t.at("names").get<std::vector<std::string>>(), "codebook tables");
      }
      r.dtype = DataType::parse(get(".dtype"));
      r.shape = detail::text_shape(get(".shape"), "", "metadata " + name + ".shape");
      r.mode = parse_cast_mode(get(".mode"));
      r.options.axis = static_cast<int>(
          detail::text_integer(get(".axis"), "", "metadata " + name + ".axis", -64, 64));
      r.options.round = parse_round(get(".round"));
      r.options.scale_mode = parse_scale_mode(get(".scale_mode"));
      r.options.seed = detail::text_unsigned(get(".seed"), "", "metadata " + name + ".seed");
      // Files without the key (all before export took --overflow) were cast saturating.
      if (meta.contains(name + ".overflow")) r.options.overflow = parse_overflow(get(".overflow"));
      // Files without the key (all before rotations existed) hold unrotated codes.
      if (meta.contains(name + ".rotate")) r.options.rotate = parse_rotation(get(".rotate"));
      // Files without the key (all before flattened axes existed) tile along NAME.axis alone.
      if (meta.contains(name + ".flatten")) {
        const std::string f = get(".flatten");
        if (f != "true" && f != "false" && f != "lead")
          throw Error("metadata " + name + ".flatten is '" + f + "', expected true, false or lead");
        r.options.flatten = f != "false";
        r.options.lead = f == "lead";
      }
      if (r.mode == CastMode::Virtual) throw Error("mode 'virtual' has no codes");
    } catch (const Error& e) {
      throw Error("'" + path + "': tensor '" + name + "': " + e.what());
    } catch (const std::exception& e) {
      throw Error("'" + path + "': tensor '" + name + "': bad metadata (" + e.what() + ")");
    }
    r.options.mode = r.mode;
    std::vector<RawPart> raws;
    for (const PackedPart& part : packed_parts()) {
      const std::string k = name + part.suffix;
      if (!header.contains(k)) continue;
      const json& e = header[k];
      RawPart raw;
      raw.part = &part;
      raw.key = k;
      try {
        raw.dtype = parse_safetensors_dtype(e.at("dtype").get<std::string>());
        raw.shape = detail::json_shape(e.at("shape"), "", "shape");
        const json& off = e.at("data_offsets");
        if (!off.is_array() || off.size() != 2) throw Error("data_offsets is not a pair");
        const uint64_t b = detail::json_unsigned(off[0], "", "data_offsets"),
                       en = detail::json_unsigned(off[1], "", "data_offsets");
        raw.nbytes = detail::checked_nbytes(raw.shape, dtype_size(raw.dtype), path, k);
        if (en < b || en - b != raw.nbytes || en > size - data_start)
          throw Error("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                      "] do not fit its shape or the file");
        raw.data = map->data() + data_start + b;
      } catch (const Error& ex) {
        throw Error("'" + path + "': tensor '" + k + "': " + ex.what());
      } catch (const std::exception& ex) {
        throw Error("'" + path + "': tensor '" + k + "': bad header entry (" + ex.what() + ")");
      }
      raws.push_back(raw);
    }
    if (raws.empty() || raws.front().part->member != &CastResult::codes)
      throw Error("'" + path + "': tensor '" + name + "' has no codes");
    const CastResult ref = reference_layout(path, pt, raws.front().nbytes);
    // Version 4 stores narrow values densely, every part whose dense stream differs from its
    // in-memory layout (the writer's rule, which follows from the metadata alone).
    const std::vector<detail::DenseField> dense =
        version >= 4 ? detail::dense_fields(r) : std::vector<detail::DenseField>{};
    for (const RawPart& raw : raws) {
      const Tensor& want = ref.*(raw.part->member);
      const detail::DenseField* f = nullptr;
      for (const detail::DenseField& d : dense)
        if (d.member == raw.part->member && detail::dense_differs(d)) f = &d;
      if (f && want) {
        if (raw.dtype != DType::U8 || raw.shape.size() != 1)
          throw Error("'" + path + "': tensor '" + raw.key + "' is " + dtype_name(raw.dtype) + " " +
                      shape_str(raw.shape) + ", expected its dense packing (U8, one axis)");
        try {
          r.*(raw.part->member) =
              detail::from_dense(*f, raw.data, raw.nbytes, want.dtype(), want.shape());
        } catch (const Error& ex) {
          throw Error("'" + path + "': tensor '" + raw.key + "': " + ex.what());
        }
      } else {
        r.*(raw.part->member) = detail::copy_raw(raw.data, raw.dtype, raw.shape);
      }
    }
    check_layout(path, pt, ref);
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace castscope::io
