// llama-imatrix's files (tools/imatrix/imatrix.cpp, common/imatrix-loader.cpp): GGUF, whose
// tensors NAME.in_sum2 [sets, n] and NAME.counts [sets, 1] hold the sums and counts, and the
// legacy .dat: int32 entry count, per entry (int32 name length, name, int32 ncall, int32 value
// count, float32 values = mean * ncall), then optionally int32 chunk count and a dataset name.
#include "castscope/imatrix.hpp"

#include <cmath>
#include <cstring>

#include "castscope/error.hpp"
#include "castscope/io.hpp"
#include "io/reader.hpp"

namespace castscope::io {
namespace {

constexpr uint32_t kAlign = 32;

std::string at(const std::string& path, const std::string& entry) {
  return "imatrix '" + path + "', entry '" + entry + "': ";
}

void check_values(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (const float x : v)
    if (!std::isfinite(x) || x < 0)
      throw Error(at(path, name) + "value " + std::to_string(x) +
                  " (importance sums must be finite and non-negative)");
}

Imatrix read_gguf_imatrix(const std::string& path) {
  const detail::GgufHeader g = detail::parse_gguf(path);
  Imatrix m;
  bool has_ds = false, has_cc = false, has_cs = false;
  for (const detail::GgufKv& kv : g.kvs) {
    // The record's bytes: key, value type, value.
    detail::GgufCursor c{g.map->data(), kv.end, kv.begin, path};
    c.str();
    const uint32_t type = c.get<uint32_t>();
    if (kv.key == "imatrix.datasets" && type == 9) {
      if (c.get<uint32_t>() != 8) continue;
      const uint64_t n = c.get<uint64_t>();
      for (uint64_t i = 0; i < n; ++i) m.datasets.push_back(c.str());
      has_ds = true;
    } else if ((kv.key == "imatrix.chunk_count" || kv.key == "imatrix.chunk_size") && type == 4) {
      const auto v = static_cast<int32_t>(c.get<uint32_t>());
      (kv.key == "imatrix.chunk_count" ? m.chunk_count : m.chunk_size) = v;
      (kv.key == "imatrix.chunk_count" ? has_cc : has_cs) = true;
    }
  }
  m.has_metadata = has_ds && has_cc && has_cs;
  if (g.tensors.empty()) throw Error("imatrix '" + path + "' holds no entries");
  std::map<std::string, std::pair<const detail::GgufTensor*, const detail::GgufTensor*>> parts;
  auto ends = [](const std::string& s, const std::string& suf) {
    return s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  for (const detail::GgufTensor& t : g.tensors) {
    if (ends(t.name, ".in_sum2"))
      parts[t.name.substr(0, t.name.size() - 8)].first = &t;
    else if (ends(t.name, ".counts"))
      parts[t.name.substr(0, t.name.size() - 7)].second = &t;
  }
  for (const auto& [name, sc] : parts) {
    if (!sc.first || !sc.second) throw Error(at(path, name) + "sums and counts do not pair up");
    if (sc.first->type_id != 0 || sc.second->type_id != 0)
      throw Error(at(path, name) + "sums and counts must be F32");
    const auto read = [&](const detail::GgufTensor& t) {
      std::vector<float> v(static_cast<size_t>(t.nbytes / 4));
      std::memcpy(v.data(), g.map->data() + g.data_start + t.offset, v.size() * 4);
      return v;
    };
    ImatrixEntry e;
    e.sums = read(*sc.first);
    const std::vector<float> counts = read(*sc.second);
    if (e.sums.empty() || counts.empty() || e.sums.size() % counts.size() != 0)
      throw Error(at(path, name) + std::to_string(e.sums.size()) + " sums do not split into " +
                  std::to_string(counts.size()) + " sets");
    check_values(path, name, e.sums);
    check_values(path, name, counts);
    for (const float c : counts) e.counts.push_back(std::lround(c));
    m.entries[name] = std::move(e);
  }
  return m;
}

Imatrix read_legacy(const std::string& path) {
  const auto map = detail::MappedFile::open(path);
  const uint8_t* p = map->data();
  const uint64_t size = map->size();
  uint64_t pos = 0;
  auto i32 = [&](const char* what) {
    if (size - pos < 4)
      throw Error("imatrix '" + path + "' is neither GGUF nor a complete legacy imatrix (" + what +
                  " missing at byte " + std::to_string(pos) + " of " + std::to_string(size) + ")");
    int32_t v;
    std::memcpy(&v, p + pos, 4);
    pos += 4;
    return v;
  };
  Imatrix m;
  m.legacy = true;
  const int32_t n = i32("entry count");
  if (n < 1 || static_cast<uint64_t>(n) > size / 12)
    throw Error("imatrix '" + path + "': implausible entry count " + std::to_string(n) +
                " for a legacy imatrix of " + std::to_string(size) + " bytes");
  for (int32_t i = 0; i < n; ++i) {
    const int32_t len = i32("name length");
    if (len < 1 || static_cast<uint64_t>(len) > size - pos)
      throw Error("imatrix '" + path + "': entry " + std::to_string(i + 1) +
                  " has a name length of " + std::to_string(len) + " past the end of the file");
    const std::string name(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
    pos += static_cast<uint64_t>(len);
    const int32_t ncall = i32("call count"), nval = i32("value count");
    if (nval < 1 || static_cast<uint64_t>(nval) > (size - pos) / 4)
      throw Error(at(path, name) + std::to_string(nval) + " values run past the end of the file");
    ImatrixEntry e;
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), p + pos, e.sums.size() * 4);
    pos += e.sums.size() * 4;
    check_values(path, name, e.sums);
    e.counts = {ncall};
    m.entries[name] = std::move(e);
  }
  if (pos < size) {  // optional: chunk count and dataset name
    m.chunk_count = i32("chunk count");
    if (size - pos >= 4) {
      const int32_t len = i32("dataset name length");
      if (len > 0 && static_cast<uint64_t>(len) <= size - pos)
        m.datasets.emplace_back(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
    }
  }
  return m;
}

class Out {
 public:
  void raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  }
  template <class T>
  void put(T v) {
    raw(&v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
  void pad() {
    while (b.size() % kAlign) b.push_back(0);
  }
  std::vector<char> b;
};

std::vector<char> gguf_bytes(const Imatrix& m) {
  Out h;
  h.raw("GGUF", 4);
  h.put<uint32_t>(3);
  h.put<uint64_t>(2 * m.entries.size());
  h.put<uint64_t>(4);
  h.str("general.type");
  h.put<uint32_t>(8);
  h.str("imatrix");
  h.str("imatrix.datasets");
  h.put<uint32_t>(9);
  h.put<uint32_t>(8);
  h.put<uint64_t>(m.datasets.size());
  for (const std::string& d : m.datasets) h.str(d);
  h.str("imatrix.chunk_count");
  h.put<uint32_t>(4);
  h.put<uint32_t>(static_cast<uint32_t>(m.chunk_count));
  h.str("imatrix.chunk_size");
  h.put<uint32_t>(4);
  h.put<uint32_t>(static_cast<uint32_t>(m.chunk_size));
  Out data;
  // ggml_n_dims: trailing dimensions of 1 are not written.
  auto info = [&](const std::string& name, uint64_t ne0, uint64_t ne1) {
    h.str(name);
    h.put<uint32_t>(ne1 > 1 ? 2 : 1);
    h.put<uint64_t>(ne0);
    if (ne1 > 1) h.put<uint64_t>(ne1);
    h.put<uint32_t>(0);  // F32
    h.put<uint64_t>(data.b.size());
  };
  for (const auto& [name, e] : m.entries) {
    const uint64_t sets = e.counts.size(), n = e.sums.size() / sets;
    info(name + ".in_sum2", n, sets);
    data.raw(e.sums.data(), e.sums.size() * 4);
    data.pad();
    info(name + ".counts", 1, sets);
    for (const int64_t c : e.counts) data.put<float>(static_cast<float>(c));
    data.pad();
  }
  h.pad();
  h.raw(data.b.data(), data.b.size());
  return h.b;
}

std::vector<char> legacy_bytes(const Imatrix& m) {
  Out o;
  o.put<int32_t>(static_cast<int32_t>(m.entries.size()));
  for (const auto& [name, e] : m.entries) {
    o.put<int32_t>(static_cast<int32_t>(name.size()));
    o.raw(name.data(), name.size());
    if (m.legacy) {
      o.put<int32_t>(static_cast<int32_t>(e.counts.at(0)));
      o.put<int32_t>(static_cast<int32_t>(e.sums.size()));
      o.raw(e.sums.data(), e.sums.size() * 4);
      continue;
    }
    // save_imatrix_legacy: ncall = ceil(max count / chunk size), values (sum / count) * ncall.
    if (m.chunk_size < 1)
      throw Error("imatrix entry '" + name + "': a legacy file needs the chunk size");
    int64_t most = 0;
    for (const int64_t c : e.counts) most = std::max(most, c);
    const auto ncall = static_cast<int32_t>((most + (m.chunk_size - 1)) / m.chunk_size);
    o.put<int32_t>(ncall);
    const auto nval = static_cast<int32_t>(e.sums.size());
    const auto nmat = static_cast<int32_t>(e.counts.size());
    o.put<int32_t>(nval);
    for (int32_t i = 0; i < nval; ++i) {
      float count = static_cast<float>(e.counts[static_cast<size_t>(i / (nval / nmat))]);
      float value = e.sums[static_cast<size_t>(i)];
      if (count == 0.0f) value = count = 1.0f;
      o.put<float>((value / count) * static_cast<float>(ncall));
    }
  }
  o.put<int32_t>(m.chunk_count);
  const std::string ds = m.datasets.empty() ? std::string() : m.datasets.back();
  o.put<int32_t>(static_cast<int32_t>(ds.size()));
  o.raw(ds.data(), ds.size());
  return o.b;
}

}  // namespace

std::vector<float> Imatrix::weights(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end()) return {};
  const ImatrixEntry& e = it->second;
  std::vector<float> w(e.sums.size());
  if (legacy) {
    const int64_t ncall = e.counts.empty() ? 0 : e.counts[0];
    for (size_t i = 0; i < w.size(); ++i) w[i] = ncall > 0 ? e.sums[i] / ncall : e.sums[i];
    return w;
  }
  const size_t sets = e.counts.size(), n = e.sums.size() / sets;
  for (size_t j = 0; j < sets; ++j) {
    const auto count = static_cast<float>(e.counts[j]);
    for (size_t i = 0; i < n; ++i) w[j * n + i] = count > 0.0f ? e.sums[j * n + i] / count : 1;
  }
  return w;
}

std::shared_ptr<const std::vector<float>> Imatrix::weights_for(const std::string& name,
                                                               const Shape& shape) const {
  std::vector<float> w = weights(name);
  if (w.empty()) return nullptr;
  const size_t rank = shape.size();
  const int64_t want = (rank ? shape.back() : 1) * (rank >= 3 ? shape[rank - 3] : 1);
  if (static_cast<int64_t>(w.size()) != want) {
    if (name.rfind("token_embd.", 0) == 0) return nullptr;
    throw Error("tensor '" + name + "': its importance matrix entry has " +
                std::to_string(w.size()) + " values where the tensor " + shape_str(shape) +
                " needs " + std::to_string(want));
  }
  return std::make_shared<const std::vector<float>>(std::move(w));
}

Imatrix read_imatrix(const std::string& path) {
  {
    const auto map = detail::MappedFile::open(path);
    if (map->size() < 4 || std::memcmp(map->data(), "GGUF", 4) != 0) return read_legacy(path);
  }
  return read_gguf_imatrix(path);
}

void write_imatrix(const std::string& path, const Imatrix& m, bool legacy) {
  for (const auto& [name, e] : m.entries)
    if (e.counts.empty() || e.sums.empty() || e.sums.size() % e.counts.size() != 0)
      throw Error("imatrix entry '" + name + "': " + std::to_string(e.sums.size()) +
                  " sums do not split into " + std::to_string(e.counts.size()) + " sets");
  const std::vector<char> bytes = legacy ? legacy_bytes(m) : gguf_bytes(m);
  write_atomically(path, [&](const auto& put) { put(bytes.data(), bytes.size()); });
}

}  // namespace castscope::io
