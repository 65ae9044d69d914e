// Helpers of the io tests: a fresh temporary folder, a recorded seed, and small writers for the
// formats (written here byte by byte, independently of the readers under test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/io.hpp"
#include "test_seed.hpp"

namespace castscope::iotest {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// The seed of this run: CASTSCOPE_TEST_SEED if set, else fresh; tests print it on failure.
inline uint64_t seed() {
  static const uint64_t s = castscope::test::test_seed();
  return s;
}
#define IO_SEED_TRACE()                                                \
  SCOPED_TRACE("seed " + std::to_string(::castscope::iotest::seed()) + \
               " (set CASTSCOPE_TEST_SEED to repeat)")

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "castscope-io-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
inline Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// A cast on the CPU in the given mode.
inline CastOptions cpu_options(CastMode mode) {
  CastOptions o;
  o.device = Device::CPU;
  o.mode = mode;
  return o;
}

// x cast to `dtype` in compress mode on the CPU, saved alone as the packed tensor "w" of path:
// the file's bytes.
inline Bytes save_packed_w(const std::string& path, const Tensor& x, const char* dtype) {
  io::save_packed(path, {{"w", cast(x, DataType::parse(dtype), cpu_options(CastMode::Compress))}});
  return read_file(path);
}

// A safetensors file's JSON header and its data.
inline std::pair<std::string, Bytes> split_safetensors(const Bytes& file) {
  uint64_t hl;
  std::memcpy(&hl, file.data(), 8);
  return {std::string(file.begin() + 8, file.begin() + 8 + static_cast<int64_t>(hl)),
          Bytes(file.begin() + 8 + static_cast<int64_t>(hl), file.end())};
}

template <class T>
void put(Bytes& b, T v) {
  uint8_t tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  b.insert(b.end(), tmp, tmp + sizeof(T));
}
inline void put_bytes(Bytes& b, const void* p, size_t n) {
  b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
}

// safetensors from a literal header (JSON text) and data block.
inline Bytes safetensors_bytes(const std::string& header, const Bytes& data) {
  Bytes b;
  put<uint64_t>(b, header.size());
  put_bytes(b, header.data(), header.size());
  put_bytes(b, data.data(), data.size());
  return b;
}

// One tensor of a test safetensors file.
struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  Bytes data;
};
inline Bytes safetensors_bytes(const std::vector<StTensor>& ts) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  Bytes data;
  for (const StTensor& t : ts) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? "," : "") + std::to_string(t.shape[i]);
    shape += "]";
    h += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
         std::to_string(data.size() + t.data.size()) + "]}";
    put_bytes(data, t.data.data(), t.data.size());
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  return safetensors_bytes(h, data);
}

// .npy version 1 with the given descr and raw data.
inline Bytes npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, bool fortran,
                       const Bytes& data) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                  ", 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    h += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  h += "), }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put<uint16_t>(b, static_cast<uint16_t>(h.size()));
  put_bytes(b, h.data(), h.size());
  put_bytes(b, data.data(), data.size());
  return b;
}

// GGUF v3 writer: tensors are (name, ggml type id, ne (fastest first), data).
struct GgufTensor {
  std::string name;
  uint32_t type;
  std::vector<uint64_t> ne;
  Bytes data;
};
inline void gguf_str(Bytes& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  put_bytes(b, s.data(), s.size());
}
inline Bytes gguf_bytes(const std::vector<GgufTensor>& ts, uint32_t alignment = 32) {
  Bytes b = {'G', 'G', 'U', 'F'};
  put<uint32_t>(b, 3);
  put<uint64_t>(b, ts.size());
  put<uint64_t>(b, 3);  // key-values
  gguf_str(b, "general.architecture");
  put<uint32_t>(b, 8);
  gguf_str(b, "test");
  gguf_str(b, "general.alignment");
  put<uint32_t>(b, 4);
  put<uint32_t>(b, alignment);
  gguf_str(b, "test.array");
  put<uint32_t>(b, 9);
  put<uint32_t>(b, 5);  // int32 elements
  put<uint64_t>(b, 3);
  for (int32_t v : {1, -2, 3}) put<int32_t>(b, v);
  uint64_t off = 0;
  std::vector<uint64_t> offs;
  for (const GgufTensor& t : ts) {
    gguf_str(b, t.name);
    put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(b, d);
    put<uint32_t>(b, t.type);
    put<uint64_t>(b, off);
    offs.push_back(off);
    off += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  while (b.size() % alignment) b.push_back(0);
  const size_t start = b.size();
  for (size_t i = 0; i < ts.size(); ++i) {
    b.resize(start + offs[i], 0);
    put_bytes(b, ts[i].data.data(), ts[i].data.size());
  }
  return b;
}

// Float from an 8-bit E4M3 (fn) or E5M2 code, decoded from the bit fields.
inline float fp8_value(uint8_t c, bool e4m3) {
  const int ebits = e4m3 ? 4 : 5, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const bool neg = c & 0x80;
  const int e = (c >> mbits) & ((1 << ebits) - 1), m = c & ((1 << mbits) - 1);
  float v;
  if (e4m3 && e == 15 && m == 7)
    v = NAN;
  else if (!e4m3 && e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  else
    v = std::ldexp(1.0f + static_cast<float>(m) / (1 << mbits), e - bias);
  return neg ? -v : v;
}

inline bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0;
}

}  // namespace castscope::iotest
