// safetensors reader: 8-byte little-endian header length, a JSON header, then the data block.
// Every entry is validated against the file before anything is mapped or allocated.
#include <cctype>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/json_fields.hpp"
#include "io/reader.hpp"

namespace castscope::io::detail {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the reference implementation's limit

struct Span {
  std::string name;
  uint64_t begin, end;
};

}  // namespace

std::vector<Entry> read_safetensors(const std::string& path) {
  auto map = MappedFile::open(path);
  const uint64_t size = map->size();
  if (size < 8)
    throw Error("'" + path + "': too short for a safetensors file (" + std::to_string(size) +
                " bytes)");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(map->data()[i]) << (8 * i);
  // A safetensors header is JSON: '{' follows the length. Anything else (text, another
  // format) is not a safetensors file at all, whatever its length field reads as.
  if (size > 8 && map->data()[8] != '{' && !std::isspace(map->data()[8]))
    throw Error("'" + path + "': not a safetensors file (" + std::to_string(size) +
                " bytes; a safetensors file starts with an 8-byte header length and a JSON "
                "header)");
  if (hl > size - 8)
    throw Error("'" + path + "': header length " + std::to_string(hl) +
                " runs past the end of the file (" + std::to_string(size) + " bytes): truncated");
  if (hl > kMaxHeader)
    throw Error("'" + path + "': header length " + std::to_string(hl) + " is implausibly large");
  json header;
  try {
    header = json::parse(map->data() + 8, map->data() + 8 + hl);
  } catch (const json::exception& e) {
    throw Error("'" + path + "': header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error("'" + path + "': header is not a JSON object");
  const uint64_t data_start = 8 + hl, data_size = size - data_start;
  std::vector<Entry> out;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& e = it.value();
    DType dt;
    Shape shape;
    uint64_t b = 0, en = 0;
    std::string dname;
    try {
      if (!e.is_object()) throw Error("entry is not an object");
      if (!e.contains("dtype") || !e["dtype"].is_string()) throw Error("no \"dtype\" string");
      dname = e["dtype"].get<std::string>();
      dt = parse_safetensors_dtype(dname);
      if (!e.contains("shape")) throw Error("no \"shape\" array");
      shape = json_shape(e["shape"], "", "shape");
      const json& off = e.contains("data_offsets") ? e["data_offsets"] : json();
      if (!off.is_array() || off.size() != 2)
        throw Error("\"data_offsets\" is not a pair of non-negative integers");
      b = json_unsigned(off[0], "", "data_offsets");
      en = json_unsigned(off[1], "", "data_offsets");
    } catch (const Error& ex) {
      throw Error(where(path, name) + ex.what());
    } catch (const json::exception& ex) {
      throw Error(where(path, name) + "bad header entry (" + ex.what() + ")");
    }
    if (en < b)
      throw Error(where(path, name) + "data_offsets [" + std::to_string(b) + ", " +
                  std::to_string(en) + "] are out of order");
    if (en > data_size)
      throw Error(where(path, name) + "data_offsets [" + std::to_string(b) + ", " +
                  std::to_string(en) + "] run past the end of the data (" +
                  std::to_string(data_size) + " bytes)");
    const uint64_t nbytes = checked_nbytes(shape, dtype_size(dt), path, name);
    if (nbytes != en - b)
      throw Error(where(path, name) + dname + " " + shape_str(shape) + " needs " +
                  std::to_string(nbytes) + " bytes but data_offsets hold " +
                  std::to_string(en - b));
    spans.push_back({name, b, en});
    Entry entry;
    entry.info = {name, dname, shape, nbytes, path, {}, {}};
    const uint8_t* p = map->data() + data_start + b;
    entry.raw = [map, p, dt, shape] { return view_raw(map, p, dt, shape); };
    entry.load = [map, p, dt, shape] {
      Tensor t = view_raw(map, p, dt, shape);
      return dt == DType::F32 ? t : t.to_f32();
    };
    out.push_back(std::move(entry));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      throw Error(where(path, spans[i].name) + "data_offsets [" + std::to_string(spans[i].begin) +
                  ", " + std::to_string(spans[i].end) + "] overlap tensor '" + spans[i - 1].name +
                  "' [" + std::to_string(spans[i - 1].begin) + ", " +
                  std::to_string(spans[i - 1].end) + "]");
  // List in file order, which is also the order that streams through the map sequentially.
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<uint64_t> begins(out.size());
  {
    std::unordered_map<std::string, uint64_t> at;
    for (const Span& s : spans) at[s.name] = s.begin;
    for (size_t i = 0; i < out.size(); ++i) begins[i] = at[out[i].info.name];
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return begins[a] < begins[b]; });
  std::vector<Entry> sorted;
  sorted.reserve(out.size());
  for (size_t i : order) sorted.push_back(std::move(out[i]));
  return sorted;
}

}  // namespace castscope::io::detail
