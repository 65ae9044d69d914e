#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "castscope/io.hpp"
#include "io/json_fields.hpp"
#include "io/reader.hpp"

namespace castscope::io {
namespace {

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
void check_layout(const std::string& path, const PackedTensor& pt) {
  const CastResult& r = pt.result;
  const std::string at = "'" + path + "': tensor '" + pt.name + "': ";
  const uint64_t n = detail::checked_numel(r.shape, path, pt.name);
  if (n == 0 || n > static_cast<uint64_t>(r.codes.numel()) * 64 + 64)
    throw Error(at + "shape " + shape_str(r.shape) + " does not match its " +
                std::to_string(r.codes.numel()) + " stored codes");
  CastOptions o = r.options;
  o.mode = r.mode;
  o.device = Device::CPU;
  o.job = nullptr;
  CastResult ref;
  try {
    ref = cast(Tensor::empty(DType::F32, r.shape), r.dtype, o);
  } catch (const Error& e) {
    throw Error(at + "datatype " + r.dtype.str() + " does not apply to shape " +
                shape_str(r.shape) + ": " + e.what());
  }
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

void save_packed(const std::string& path, const std::vector<PackedTensor>& tensors,
                 const std::vector<std::pair<std::string, std::string>>& extra_metadata) {
  json header = json::object();
  json meta = json::object();
  meta["format"] = "castscope-packed";
  for (const auto& [k, v] : extra_metadata) meta[k] = v;
  int version = 1;
  std::vector<const Tensor*> order;
  uint64_t offset = 0;
  for (const PackedTensor& pt : tensors) {
    const CastResult& r = pt.result;
    if (r.mode == CastMode::Virtual)
      throw Error("tensor '" + pt.name + "': a virtual cast has no codes to pack");
    for (const auto& [k, v] : packed_tensor_metadata(pt.name, r)) meta[k] = v;
    version = std::max(version, packed_version(r));
    for (const PackedPart& part : packed_parts()) {
      const Tensor& t = r.*(part.member);
      if (!t) continue;
      const std::string key = pt.name + part.suffix;
      if (header.contains(key)) throw Error("duplicate tensor name '" + key + "' in packed export");
      header[key] = {{"dtype", safetensors_dtype(t.dtype())},
                     {"shape", t.shape()},
                     {"data_offsets", {offset, offset + t.nbytes()}}};
      offset += t.nbytes();
      order.push_back(&t);
    }
  }
  meta["castscope.version"] = std::to_string(version);
  header["__metadata__"] = meta;
  std::string hs = header.dump();
  while (hs.size() % 8) hs += ' ';
  write_atomically(path, [&](const auto& put) {
    uint64_t n = hs.size();
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    put(len, 8);
    put(hs.data(), hs.size());
    for (const Tensor* t : order) put(t->data(), t->nbytes());
  });
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
  std::vector<PackedTensor> out;
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    const std::string& key = it.key();
    if (key.size() < 7 || key.compare(key.size() - 6, 6, ".dtype") != 0) continue;
    const std::string name = key.substr(0, key.size() - 6);
    auto get = [&](const std::string& k) -> std::string {
      if (!meta.contains(name + k))
        throw Error("'" + path + "': tensor '" + name + "' has no " + k.substr(1) +
                    " in __metadata__");
      return meta[name + k].get<std::string>();
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
      r.dtype = DataType::parse(it.value().get<std::string>());
      r.shape = detail::text_shape(get(".shape"), "", "metadata " + name + ".shape");
      r.mode = parse_cast_mode(get(".mode"));
      r.options.axis = static_cast<int>(
          detail::text_integer(get(".axis"), "", "metadata " + name + ".axis", -64, 64));
      r.options.round = parse_round(get(".round"));
      r.options.scale_mode = parse_scale_mode(get(".scale_mode"));
      r.options.seed = detail::text_unsigned(get(".seed"), "", "metadata " + name + ".seed");
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
    for (const PackedPart& part : packed_parts()) {
      const std::string k = name + part.suffix;
      if (!header.contains(k)) continue;
      const json& e = header[k];
      try {
        const DType dt = parse_safetensors_dtype(e.at("dtype").get<std::string>());
        const Shape shape = detail::json_shape(e.at("shape"), "", "shape");
        const json& off = e.at("data_offsets");
        if (!off.is_array() || off.size() != 2) throw Error("data_offsets is not a pair");
        const uint64_t b = detail::json_unsigned(off[0], "", "data_offsets"),
                       en = detail::json_unsigned(off[1], "", "data_offsets");
        const uint64_t nbytes = detail::checked_nbytes(shape, dtype_size(dt), path, k);
        if (en < b || en - b != nbytes || en > size - data_start)
          throw Error("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                      "] do not fit its shape or the file");
        r.*(part.member) = detail::copy_raw(map->data() + data_start + b, dt, shape);
      } catch (const Error& ex) {
        throw Error("'" + path + "': tensor '" + k + "': " + ex.what());
      } catch (const std::exception& ex) {
        throw Error("'" + path + "': tensor '" + k + "': bad header entry (" + ex.what() + ")");
      }
    }
    if (!r.codes) throw Error("'" + path + "': tensor '" + name + "' has no codes");
    check_layout(path, pt);
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace castscope::io
