#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "castscope/io.hpp"

namespace castscope::io {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"f4", DType::F32}, {"f2", DType::F16}, {"f8", DType::F64}, {"u1", DType::U8},  {"i1", DType::I8},
    {"u2", DType::U16}, {"i2", DType::I16}, {"u4", DType::U32}, {"i4", DType::I32}, {"u8", DType::U64},
    {"i8", DType::I64}, {"b1", DType::Bool},
};

std::string descr_of(DType d) {
  if (d == DType::BF16) throw Error("bfloat16 has no .npy dtype; convert to float32 first");
  if (d == DType::F8E4M3 || d == DType::F8E5M2) throw Error("float8 has no .npy dtype; save the raw codes as uint8");
  for (const NpyType& t : kTypes)
    if (t.dtype == d) return (dtype_size(d) == 1 ? "|" : "<") + std::string(t.descr);
  throw Error("unsupported dtype for .npy");
}

}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "' for reading");
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  f.seekg(0);
  char magic[8];
  if (size < 10 || !f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw Error("'" + path + "' is not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t hlen = 0;
  unsigned char lb[4] = {0, 0, 0, 0};
  if (major == 1) {
    if (!f.read(reinterpret_cast<char*>(lb), 2)) throw Error("'" + path + "': truncated header");
    hlen = lb[0] | (lb[1] << 8);
  } else if (major == 2 || major == 3) {
    if (!f.read(reinterpret_cast<char*>(lb), 4)) throw Error("'" + path + "': truncated header");
    hlen = lb[0] | (lb[1] << 8) | (lb[2] << 16) | (static_cast<uint32_t>(lb[3]) << 24);
  } else {
    throw Error("'" + path + "': unsupported .npy version " + std::to_string(major));
  }
  const int64_t data_off = (major == 1 ? 10 : 12) + static_cast<int64_t>(hlen);
  if (hlen > (1u << 20) || data_off > size) throw Error("'" + path + "': header length " + std::to_string(hlen) + " runs past the end of the file");
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  std::smatch m;
  static const std::regex descr_re("'descr'\\s*:\\s*'([<>|=])([a-z])([0-9]+)'");
  static const std::regex order_re("'fortran_order'\\s*:\\s*(True|False)");
  static const std::regex shape_re("'shape'\\s*:\\s*\\(([0-9,\\s]*)\\)");
  if (!std::regex_search(header, m, descr_re)) throw Error("'" + path + "': header has no supported 'descr'");
  const char endian = m[1].str()[0];
  const std::string code = m[2].str() + m[3].str();
  DType dtype = DType::F32;
  bool found = false;
  for (const NpyType& t : kTypes)
    if (code == t.descr) {
      dtype = t.dtype;
      found = true;
    }
  if (!found) throw Error("'" + path + "': unsupported dtype '" + code + "'");
  if (!std::regex_search(header, m, order_re)) throw Error("'" + path + "': header has no 'fortran_order'");
  const bool fortran = m[1] == "True";
  if (!std::regex_search(header, m, shape_re)) throw Error("'" + path + "': header has no 'shape'");
  Shape shape;
  std::stringstream ss(m[1].str());
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    if (item.empty() || item.find_first_not_of(" \t") == std::string::npos) continue;
    if (item.size() > 15) throw Error("'" + path + "': absurd dimension in shape");
    shape.push_back(std::stoll(item));
  }
  Tensor t = Tensor::empty(dtype, shape);
  if (static_cast<int64_t>(t.nbytes()) > size - data_off)
    throw Error("'" + path + "': truncated data (" + std::to_string(size - data_off) + " bytes for shape " + shape_str(shape) + " of " + dtype_name(dtype) + ")");
  f.read(static_cast<char*>(t.mutable_data()), static_cast<std::streamsize>(t.nbytes()));
  const size_t es = dtype_size(dtype);
  if (endian == '>' && es > 1) {
    uint8_t* p = static_cast<uint8_t*>(t.mutable_data());
    for (int64_t i = 0; i < t.numel(); ++i) std::reverse(p + i * es, p + (i + 1) * es);
  }
  if (fortran && shape.size() > 1) {
    // Fortran order is the C-order array of the reversed shape, transposed.
    Shape rev(shape.rbegin(), shape.rend());
    Tensor c = Tensor::empty(dtype, shape);
    const uint8_t* src = static_cast<const uint8_t*>(t.data());
    uint8_t* dst = static_cast<uint8_t*>(c.mutable_data());
    const int r = static_cast<int>(shape.size());
    std::vector<int64_t> idx(r, 0);
    for (int64_t k = 0; k < t.numel(); ++k) {
      int64_t off = 0, stride = 1;
      for (int i = 0; i < r; ++i) {
        off += idx[i] * stride;
        stride *= shape[i];
      }
      std::memcpy(dst + k * es, src + off * es, es);
      for (int i = r - 1; i >= 0; --i) {
        if (++idx[i] < shape[i]) break;
        idx[i] = 0;
      }
    }
    t = c;
  }
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  std::string header = "{'descr': '" + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i) header += std::to_string(t.shape()[i]) + (t.shape().size() == 1 || i + 1 < t.shape().size() ? "," : "");
  header += "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  write_atomically(path, [&](const auto& put) {
    const uint16_t hl = static_cast<uint16_t>(header.size());
    const char pre[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(hl & 0xFF), static_cast<char>(hl >> 8)};
    put(pre, 10);
    put(header.data(), header.size());
    put(t.data(), t.nbytes());
  });
}

}  // namespace castscope::io
