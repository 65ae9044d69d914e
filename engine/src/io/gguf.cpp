// GGUF (v2 / v3): magic, version, tensor and key-value counts, the key-values, the tensor infos,
// then the aligned data block. Block formats are dequantized to float32 on load by
// io/ggml_types.cpp.
#include <cmath>

#include "families/ggml/ggml_types.hpp"
#include "io/reader.hpp"

namespace castscope::io::detail {
namespace {

uint64_t scalar_size(uint32_t t, const std::string& path) {
  switch (t) {
    case 0:
    case 1:
    case 7:
      return 1;
    case 2:
    case 3:
      return 2;
    case 4:
    case 5:
    case 6:
      return 4;
    case 10:
    case 11:
    case 12:
      return 8;
    default:
      throw Error("'" + path + "': unknown GGUF value type " + std::to_string(t));
  }
}

// Skips one value; returns it as an integer when it is a scalar integer (for general.alignment).
int64_t skip_value(GgufCursor& c, uint32_t type, int depth) {
  if (type == 8) {
    c.str();
    return -1;
  }
  if (type == 9) {
    if (depth > 2) throw Error("'" + c.path + "': GGUF arrays nested too deeply");
    const uint32_t et = c.get<uint32_t>();
    const uint64_t n = c.get<uint64_t>();
    if (et == 8 || et == 9) {
      if (n > c.size)
        throw Error("'" + c.path + "': GGUF array length " + std::to_string(n) +
                    " runs past the file");
      for (uint64_t i = 0; i < n; ++i) skip_value(c, et, depth + 1);
    } else {
      const uint64_t es = scalar_size(et, c.path);
      if (n > c.size / es)
        throw Error("'" + c.path + "': GGUF array length " + std::to_string(n) +
                    " runs past the file");
      c.skip(n * es);
    }
    return -1;
  }
  const uint64_t n = scalar_size(type, c.path);
  c.need(n);
  int64_t v = 0;
  if (type == 4)
    v = c.get<uint32_t>();
  else if (type == 10)
    v = static_cast<int64_t>(std::min<uint64_t>(c.get<uint64_t>(), 1ull << 40));
  else if (type == 5)
    v = c.get<int32_t>();
  else
    c.skip(n);
  return v;
}

}  // namespace

GgufHeader parse_gguf(const std::string& path) {
  GgufHeader g;
  g.map = MappedFile::open(path);
  const auto& map = g.map;
  GgufCursor c{map->data(), map->size(), 0, path};
  c.need(4);
  if (std::memcmp(map->data(), "GGUF", 4) != 0)
    throw Error("'" + path + "' is not a GGUF file (bad magic)");
  c.pos = 4;
  const uint32_t version = c.get<uint32_t>();
  if (version != 2 && version != 3)
    throw Error("'" + path + "': unsupported GGUF version " + std::to_string(version) +
                " (2 and 3 are read)");
  const uint64_t n_tensors = c.get<uint64_t>(), n_kv = c.get<uint64_t>();
  // Each key-value takes at least 12 bytes and each tensor info at least 24.
  if (n_kv > map->size() / 12 || n_tensors > map->size() / 24)
    throw Error("'" + path + "': GGUF counts (" + std::to_string(n_tensors) + " tensors, " +
                std::to_string(n_kv) + " key-values) do not fit the file");
  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t begin = c.pos;
    const std::string key = c.str();
    const uint32_t type = c.get<uint32_t>();
    const int64_t v = skip_value(c, type, 0);
    if (key == "general.alignment") {
      if (v <= 0 || (v & (v - 1)) != 0 || v > (1 << 20))
        throw Error("'" + path + "': general.alignment must be a power of two (got " +
                    std::to_string(v) + ")");
      alignment = static_cast<uint64_t>(v);
    }
    g.kvs.push_back({key, begin, c.pos});
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor r;
    r.name = c.str();
    const uint32_t nd = c.get<uint32_t>();
    if (nd > 8) throw Error(where(path, r.name) + "absurd rank " + std::to_string(nd));
    std::vector<uint64_t> ne(nd);
    for (uint32_t d = 0; d < nd; ++d) {
      ne[d] = c.get<uint64_t>();
      if (ne[d] > (uint64_t{1} << 46))
        throw Error(where(path, r.name) + "absurd dimension " + std::to_string(ne[d]));
    }
    // ggml lists dimensions fastest first; the shape is written slowest first.
    for (uint32_t d = nd; d-- > 0;) r.shape.push_back(static_cast<int64_t>(ne[d]));
    r.type_id = c.get<uint32_t>();
    r.type = ggml::type_info(r.type_id);
    r.offset = c.get<uint64_t>();
    const uint64_t n = checked_numel(r.shape, path, r.name);
    if (!r.type) {
      r.nbytes = 0;
    } else {
      if (r.type->block > 1 && (nd == 0 ? 1 : ne[0]) % r.type->block != 0)
        throw Error(where(path, r.name) + r.type->name + " needs rows that are a multiple of " +
                    std::to_string(r.type->block) + " elements (row of " +
                    std::to_string(nd ? ne[0] : 1) + ")");
      r.nbytes = ggml::row_bytes(*r.type, n);
    }
    g.tensors.push_back(std::move(r));
  }
  g.alignment = alignment;
  g.data_start = (c.pos + alignment - 1) / alignment * alignment;
  if (g.data_start > map->size() && n_tensors > 0)
    throw Error("'" + path + "': GGUF data block starts past the end of the file");
  const uint64_t data_size = map->size() > g.data_start ? map->size() - g.data_start : 0;
  for (const GgufTensor& r : g.tensors) {
    if (!r.type) continue;  // its size is unknown; listed, but never read
    if (r.offset % alignment != 0)
      throw Error(where(path, r.name) + "offset " + std::to_string(r.offset) +
                  " is not aligned to " + std::to_string(alignment));
    if (r.offset > data_size || r.nbytes > data_size - r.offset)
      throw Error(where(path, r.name) + "data [" + std::to_string(r.offset) + ", +" +
                  std::to_string(r.nbytes) + ") runs past the end of the file");
  }
  return g;
}

std::vector<Entry> read_gguf(const std::string& path) {
  const GgufHeader g = parse_gguf(path);
  const auto& map = g.map;
  std::vector<Entry> out;
  for (const GgufTensor& r : g.tensors) {
    Entry e;
    const std::string name = r.name;
    if (!r.type || !r.type->decodes) {
      // Listed so that a model with other quantizations still opens; loading it says why not.
      const std::string t =
          r.type ? std::string(r.type->name) + " (ggml type " + std::to_string(r.type_id) + ")"
                 : "ggml type " + std::to_string(r.type_id);
      e.info = {r.name,  r.type ? r.type->name : "ggml_type_" + std::to_string(r.type_id),
                r.shape, r.nbytes,
                path,    {},
                {}};
      e.load = [path, name, t]() -> Tensor {
        throw Error(where(path, name) + "GGUF tensor type " + t +
                    " cannot be decoded (ggml's gguf-py cannot dequantize it either)");
      };
      out.push_back(std::move(e));
      continue;
    }
    e.info = {r.name, r.type->name, r.shape, r.nbytes, path, {}, {}};
    const uint8_t* p = map->data() + g.data_start + r.offset;
    const Shape shape = r.shape;
    if (const std::optional<DType> dt = ggml::plain_dtype(r.type_id)) {
      const DType d = *dt;
      e.raw = [map, p, d, shape] { return view_raw(map, p, d, shape); };
      e.load = [map, p, d, shape] {
        Tensor t = view_raw(map, p, d, shape);
        return d == DType::F32 ? t : t.to_f32();
      };
    } else {
      const uint32_t type = r.type_id;
      e.load = [map, p, type, shape] {
        Tensor t = Tensor::empty(DType::F32, shape);
        ggml::dequantize(type, p, static_cast<uint64_t>(t.numel()), t.mutable_ptr<float>());
        return t;
      };
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace castscope::io::detail
