// A minimal, independent safetensors / GGUF reader for the export tests: what a consumer in
// another project would do with the file, written from the format descriptions only.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace exporttest {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct StTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct StFile {
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;
};

inline StFile read_st(const std::string& path) {
  const std::string all = slurp(path);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<uint8_t>(all[i])) << (8 * i);
  const nlohmann::json h = nlohmann::json::parse(all.substr(8, hl));
  StFile f;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m) f.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    StTensor t;
    t.dtype = (*it)["dtype"];
    t.shape = (*it)["shape"].get<std::vector<int64_t>>();
    const uint64_t b = (*it)["data_offsets"][0], e = (*it)["data_offsets"][1];
    t.bytes = all.substr(8 + hl + b, e - b);
    f.tensors[it.key()] = t;
  }
  return f;
}

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // innermost first
  uint32_t type;
  uint64_t offset;
  const uint8_t* data;
};

struct GgufFile {
  std::string all;
  uint32_t version = 0;
  std::map<std::string, std::string> strings;
  std::map<std::string, uint64_t> uints;
  std::vector<GgufTensor> tensors;
};

inline GgufFile read_gguf(const std::string& path) {
  GgufFile g;
  g.all = slurp(path);
  size_t p = 0;
  auto rd = [&](void* dst, size_t n) {
    if (p + n > g.all.size()) throw std::runtime_error("gguf: truncated");
    std::memcpy(dst, g.all.data() + p, n);
    p += n;
  };
  auto u32 = [&] {
    uint32_t v;
    rd(&v, 4);
    return v;
  };
  auto u64 = [&] {
    uint64_t v;
    rd(&v, 8);
    return v;
  };
  auto str = [&] {
    const uint64_t n = u64();
    std::string s(n, '\0');
    rd(s.data(), n);
    return s;
  };
  if (g.all.compare(0, 4, "GGUF") != 0) throw std::runtime_error("gguf: bad magic");
  p = 4;
  g.version = u32();
  const uint64_t nt = u64(), nkv = u64();
  for (uint64_t i = 0; i < nkv; ++i) {
    const std::string k = str();
    const uint32_t t = u32();
    if (t == 8)
      g.strings[k] = str();
    else if (t == 4)
      g.uints[k] = u32();
    else
      throw std::runtime_error("gguf: unexpected kv type in test reader");
  }
  for (uint64_t i = 0; i < nt; ++i) {
    GgufTensor t;
    t.name = str();
    const uint32_t nd = u32();
    for (uint32_t d = 0; d < nd; ++d) t.ne.push_back(u64());
    t.type = u32();
    t.offset = u64();
    g.tensors.push_back(t);
  }
  const uint64_t align = g.uints.count("general.alignment") ? g.uints["general.alignment"] : 32;
  const size_t start = (p + align - 1) / align * align;
  for (GgufTensor& t : g.tensors)
    t.data = reinterpret_cast<const uint8_t*>(g.all.data()) + start + t.offset;
  return g;
}

// OCP E2M1 code to value.
inline double e2m1(uint8_t c) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8 ? -1 : 1) * mag[c & 7];
}

inline double e4m3fn(uint8_t c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  const double s = c & 0x80 ? -1 : 1;
  if ((c & 0x7F) == 0x7F) return NAN;
  return e == 0 ? s * m * std::ldexp(1.0, -9) : s * (8 + m) * std::ldexp(1.0, e - 10);
}

inline float f16(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double s = h & 0x8000 ? -1 : 1;
  if (e == 31) return m ? NAN : static_cast<float>(s * INFINITY);
  return static_cast<float>(e == 0 ? s * m * std::ldexp(1.0, -24)
                                   : s * (1024 + m) * std::ldexp(1.0, e - 25));
}

}  // namespace exporttest
