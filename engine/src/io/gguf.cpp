// GGUF (v2 / v3): magic, version, tensor and key-value counts, the key-values, the tensor infos,
// then the aligned data block. Block formats are dequantized to float32 on load following
// ggml's layouts: Q8_0 (fp16 scale + 32 int8), Q4_0 (fp16 scale + 16 bytes: element j in the
// low nibble of byte j, element j+16 in its high nibble, offset 8) and MXFP4 (E8M0 byte + the
// same nibble order of E2M1 codes).
#include <cmath>

#include "io/reader.hpp"

namespace castscope::io::detail {
namespace {

enum GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, BF16 = 30, MXFP4 = 39 };

struct TypeInfo {
  uint32_t id;
  const char* name;
  uint32_t block;        // elements per block
  uint32_t block_bytes;  // bytes per block
};
constexpr TypeInfo kTypes[] = {
    {F32, "F32", 1, 4},     {F16, "F16", 1, 2},     {BF16, "BF16", 1, 2},
    {Q8_0, "Q8_0", 32, 34}, {Q4_0, "Q4_0", 32, 18}, {MXFP4, "MXFP4", 32, 17},
};

// Bounds-checked little-endian reader over the mapped header.
struct Cursor {
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
int64_t skip_value(Cursor& c, uint32_t type, int depth) {
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

void dequant(uint32_t type, const uint8_t* src, uint64_t n, float* out) {
  switch (type) {
    case F32:
      std::memcpy(out, src, n * 4);
      return;
    case F16:
    case BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = type == F16 ? half_to_float(h) : bf16_to_float(h);
      }
      return;
    default:
      break;
  }
  static const int8_t kE2M1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const TypeInfo* ti = nullptr;
  for (const TypeInfo& t : kTypes)
    if (t.id == type) ti = &t;
  for (uint64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = src + b * ti->block_bytes;
    float* o = out + b * 32;
    if (type == Q8_0) {
      uint16_t d;
      std::memcpy(&d, blk, 2);
      const float scale = half_to_float(d);
      for (int j = 0; j < 32; ++j)
        o[j] = scale * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
    } else if (type == Q4_0) {
      uint16_t d;
      std::memcpy(&d, blk, 2);
      const float scale = half_to_float(d);
      for (int j = 0; j < 16; ++j) {
        o[j] = scale * static_cast<float>((blk[2 + j] & 0xF) - 8);
        o[j + 16] = scale * static_cast<float>((blk[2 + j] >> 4) - 8);
      }
    } else {  // MXFP4: codes are twice the E2M1 value, so the E8M0 scale is halved
      const int e = blk[0] - 128;
      for (int j = 0; j < 16; ++j) {
        o[j] = std::ldexp(static_cast<float>(kE2M1x2[blk[1 + j] & 0xF]), e);
        o[j + 16] = std::ldexp(static_cast<float>(kE2M1x2[blk[1 + j] >> 4]), e);
      }
    }
  }
}

}  // namespace

std::vector<Entry> read_gguf(const std::string& path) {
  auto map = MappedFile::open(path);
  Cursor c{map->data(), map->size(), 0, path};
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
    const std::string key = c.str();
    const uint32_t type = c.get<uint32_t>();
    const int64_t v = skip_value(c, type, 0);
    if (key == "general.alignment") {
      if (v <= 0 || (v & (v - 1)) != 0 || v > (1 << 20))
        throw Error("'" + path + "': general.alignment must be a power of two (got " +
                    std::to_string(v) + ")");
      alignment = static_cast<uint64_t>(v);
    }
  }
  struct Raw {
    std::string name;
    Shape shape;
    const TypeInfo* type;  // null: a ggml type this reader does not decode
    uint32_t type_id;
    uint64_t offset, nbytes;
  };
  std::vector<Raw> raws;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Raw r;
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
    const uint32_t t = c.get<uint32_t>();
    r.type = nullptr;
    r.type_id = t;
    for (const TypeInfo& ti : kTypes)
      if (ti.id == t) r.type = &ti;
    r.offset = c.get<uint64_t>();
    const uint64_t n = checked_numel(r.shape, path, r.name);
    if (!r.type) {
      r.nbytes = 0;
    } else {
      if (r.type->block > 1 && (nd == 0 ? 1 : ne[0]) % r.type->block != 0)
        throw Error(where(path, r.name) + r.type->name + " needs rows that are a multiple of " +
                    std::to_string(r.type->block) + " elements (row of " +
                    std::to_string(nd ? ne[0] : 1) + ")");
      r.nbytes = n / r.type->block * r.type->block_bytes;
    }
    raws.push_back(std::move(r));
  }
  const uint64_t data_start = (c.pos + alignment - 1) / alignment * alignment;
  if (data_start > map->size() && n_tensors > 0)
    throw Error("'" + path + "': GGUF data block starts past the end of the file");
  const uint64_t data_size = map->size() > data_start ? map->size() - data_start : 0;
  std::vector<Entry> out;
  for (Raw& r : raws) {
    if (!r.type) {
      const std::string t = std::to_string(r.type_id);
      // Listed so that a model with other quantizations still opens; loading it says why not.
      Entry e;
      e.info = {r.name, "ggml_type_" + t, r.shape, 0, path};
      const std::string name = r.name;
      e.load = [path, name, t]() -> Tensor {
        throw Error(where(path, name) + "GGUF tensor type " + t +
                    " is not supported (F32, F16, BF16, Q8_0, Q4_0, MXFP4 are)");
      };
      out.push_back(std::move(e));
      continue;
    }
    if (r.offset % alignment != 0)
      throw Error(where(path, r.name) + "offset " + std::to_string(r.offset) +
                  " is not aligned to " + std::to_string(alignment));
    if (r.offset > data_size || r.nbytes > data_size - r.offset)
      throw Error(where(path, r.name) + "data [" + std::to_string(r.offset) + ", +" +
                  std::to_string(r.nbytes) + ") runs past the end of the file");
    Entry e;
    e.info = {r.name, r.type->name, r.shape, r.nbytes, path};
    const uint8_t* p = map->data() + data_start + r.offset;
    const uint32_t type = r.type->id;
    const Shape shape = r.shape;
    e.load = [map, p, type, shape] {
      Tensor t = Tensor::empty(DType::F32, shape);
      dequant(type, p, static_cast<uint64_t>(t.numel()), t.mutable_ptr<float>());
      return t;
    };
    if (type == F32 || type == F16 || type == BF16) {
      const DType dt = type == F32 ? DType::F32 : type == F16 ? DType::F16 : DType::BF16;
      e.raw = [map, p, dt, shape] { return view_raw(map, p, dt, shape); };
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace castscope::io::detail
