// .npy: magic, version, header length, a Python dict literal header, then the array bytes.
// The header is parsed by hand (no regex backtracking on hostile input).
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/reader.hpp"

namespace castscope::io {
namespace detail {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"f4", DType::F32}, {"f2", DType::F16}, {"f8", DType::F64}, {"u1", DType::U8},
    {"i1", DType::I8},  {"u2", DType::U16}, {"i2", DType::I16}, {"u4", DType::U32},
    {"i4", DType::I32}, {"u8", DType::U64}, {"i8", DType::I64}, {"b1", DType::Bool},
};

// Cursor over the dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
struct DictParser {
  const char* p;
  const char* end;
  const std::string& what;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(what + ": malformed .npy header (" + why + ")");
  }
  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool eat(char c) {
    ws();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (p >= end || (*p != '\'' && *p != '"')) fail("expected a string");
    const char q = *p++;
    const char* s = p;
    while (p < end && *p != q) ++p;
    if (p >= end) fail("unterminated string");
    return std::string(s, p++);
  }
  bool boolean() {
    ws();
    auto word = [&](const char* w) {
      const size_t n = std::strlen(w);
      if (static_cast<size_t>(end - p) >= n && std::memcmp(p, w, n) == 0) {
        p += n;
        return true;
      }
      return false;
    };
    if (word("True")) return true;
    if (word("False")) return false;
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape s;
    while (!eat(')')) {
      ws();
      int64_t v = 0;
      int digits = 0;
      while (p < end && *p >= '0' && *p <= '9') {
        if (++digits > 15) fail("absurd dimension");
        v = v * 10 + (*p++ - '0');
      }
      if (p < end && *p == 'L') ++p;  // Python 2 long suffix
      if (!digits) fail("shape is not a tuple of integers");
      s.push_back(v);
      if (s.size() > 64) fail("absurd rank");
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return s;
  }
};

}  // namespace

NpyHeader parse_npy_header(const uint8_t* p, uint64_t size, const std::string& what,
                           bool header_only) {
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    throw Error(what + " is not a .npy file (bad magic)");
  const int major = p[6];
  uint64_t hlen = 0, pre = 0;
  if (major == 1) {
    hlen = p[8] | (p[9] << 8);
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw Error(what + ": truncated .npy header");
    hlen = p[8] | (p[9] << 8) | (p[10] << 16) | (static_cast<uint64_t>(p[11]) << 24);
    pre = 12;
  } else {
    throw Error(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (hlen > size - pre)
    throw Error(what + ": header length " + std::to_string(hlen) + " runs past the end (" +
                std::to_string(size) + " bytes)");
  NpyHeader h;
  h.data_offset = pre + hlen;
  DictParser d{reinterpret_cast<const char*>(p + pre),
               reinterpret_cast<const char*>(p + pre + hlen), what};
  bool has_descr = false, has_order = false, has_shape = false;
  d.expect('{');
  while (!d.eat('}')) {
    const std::string key = d.str();
    d.expect(':');
    if (key == "descr") {
      const std::string v = d.str();
      if (v.size() < 3 || std::string("<>|=").find(v[0]) == std::string::npos)
        throw Error(what + ": unsupported .npy dtype '" + v + "'");
      const std::string code = v.substr(1);
      bool found = false;
      for (const NpyType& t : kTypes)
        if (code == t.descr) {
          h.dtype = t.dtype;
          found = true;
        }
      if (!found) throw Error(what + ": unsupported .npy dtype '" + v + "'");
      h.big_endian = v[0] == '>';
      has_descr = true;
    } else if (key == "fortran_order") {
      h.fortran = d.boolean();
      has_order = true;
    } else if (key == "shape") {
      h.shape = d.tuple();
      has_shape = true;
    } else {
      d.fail("unknown key '" + key + "'");
    }
    if (!d.eat(',')) {
      d.expect('}');
      break;
    }
  }
  if (!has_descr || !has_order || !has_shape) d.fail("needs 'descr', 'fortran_order' and 'shape'");
  h.nbytes = checked_nbytes(h.shape, dtype_size(h.dtype), what, "array");
  if (!header_only && h.nbytes > size - h.data_offset)
    throw Error(what + ": truncated data (" + std::to_string(size - h.data_offset) + " bytes for " +
                dtype_name(h.dtype) + " " + shape_str(h.shape) + ", which needs " +
                std::to_string(h.nbytes) + ")");
  return h;
}

Tensor decode_npy_data(const NpyHeader& h, const uint8_t* data) {
  if (!h.fortran || h.shape.size() < 2) return copy_raw(data, h.dtype, h.shape, h.big_endian);
  // Fortran order is the C-order array of the reversed shape, transposed.
  Tensor src = copy_raw(data, h.dtype, Shape(h.shape.rbegin(), h.shape.rend()), h.big_endian);
  Tensor c = Tensor::empty(h.dtype, h.shape);
  const size_t es = dtype_size(h.dtype);
  const uint8_t* s = static_cast<const uint8_t*>(src.data());
  uint8_t* dst = static_cast<uint8_t*>(c.mutable_data());
  const int r = static_cast<int>(h.shape.size());
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < c.numel(); ++k) {
    int64_t off = 0, stride = 1;
    for (int i = 0; i < r; ++i) {
      off += idx[i] * stride;
      stride *= h.shape[i];
    }
    std::memcpy(dst + k * es, s + off * es, es);
    for (int i = r - 1; i >= 0; --i) {
      if (++idx[i] < h.shape[i]) break;
      idx[i] = 0;
    }
  }
  return c;
}

std::vector<Entry> read_npy_entries(const std::string& path) {
  auto map = MappedFile::open(path);
  const NpyHeader h = parse_npy_header(map->data(), map->size(), "'" + path + "'");
  Entry e;
  e.info = {std::filesystem::path(path).stem().string(),
            dtype_name(h.dtype),
            h.shape,
            h.nbytes,
            path,
            {},
            {}};
  const uint8_t* p = map->data() + h.data_offset;
  const bool plain = !h.big_endian && (!h.fortran || h.shape.size() < 2);
  e.raw = [map, h, p, plain] {
    return plain ? view_raw(map, p, h.dtype, h.shape) : decode_npy_data(h, p);
  };
  e.load = [map, h, p, plain] {
    Tensor t = plain ? view_raw(map, p, h.dtype, h.shape) : decode_npy_data(h, p);
    return t.dtype() == DType::F32 ? t : t.to_f32();
  };
  std::vector<Entry> out;
  out.push_back(std::move(e));
  return out;
}

}  // namespace detail

namespace {

std::string descr_of(DType d) {
  if (d == DType::BF16) throw Error("bfloat16 has no .npy dtype; convert to float32 first");
  if (d == DType::F8E4M3 || d == DType::F8E5M2)
    throw Error("float8 has no .npy dtype; save the raw codes as uint8");
  switch (d) {
    case DType::F32:
      return "<f4";
    case DType::F16:
      return "<f2";
    case DType::F64:
      return "<f8";
    case DType::U8:
      return "|u1";
    case DType::I8:
      return "|i1";
    case DType::U16:
      return "<u2";
    case DType::I16:
      return "<i2";
    case DType::U32:
      return "<u4";
    case DType::I32:
      return "<i4";
    case DType::U64:
      return "<u8";
    case DType::I64:
      return "<i8";
    case DType::Bool:
      return "|b1";
    default:
      throw Error("unsupported dtype for .npy");
  }
}

}  // namespace

Tensor load_npy(const std::string& path) {
  auto map = detail::MappedFile::open(path);
  const detail::NpyHeader h = detail::parse_npy_header(map->data(), map->size(), "'" + path + "'");
  return detail::decode_npy_data(h, map->data() + h.data_offset);
}

void save_npy(const std::string& path, const Tensor& t) {
  std::string header =
      "{'descr': '" + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i)
    header += std::to_string(t.shape()[i]) +
              (t.shape().size() == 1 || i + 1 < t.shape().size() ? "," : "");
  header += "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  if (header.size() > 65535)
    throw Error("'" + path + "': shape too long for a version 1 .npy header");
  write_atomically(path, [&](const auto& put) {
    const uint16_t hl = static_cast<uint16_t>(header.size());
    const char pre[10] = {'\x93',
                          'N',
                          'U',
                          'M',
                          'P',
                          'Y',
                          1,
                          0,
                          static_cast<char>(hl & 0xFF),
                          static_cast<char>(hl >> 8)};
    put(pre, 10);
    put(header.data(), header.size());
    put(t.data(), t.nbytes());
  });
}

}  // namespace castscope::io
