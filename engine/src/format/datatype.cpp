#include <cctype>
#include <charconv>
#include <regex>
#include <sstream>

#include "castscope/datatype.hpp"
#include "families/ggml/ggml_types.hpp"

namespace castscope {
namespace {

std::string lower_trim(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  size_t i = 0;
  while (i < out.size() && std::isspace(static_cast<unsigned char>(out[i]))) ++i;
  return out.substr(i);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool is_pow2(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}

[[noreturn]] void fail(std::string_view text, const std::string& segment, const std::string& why) {
  std::string msg = "datatype '" + std::string(text) + "'";
  if (!segment.empty()) msg += ": segment '" + segment + "'";
  throw Error(msg + ": " + why);
}

const std::regex& tile_regex() {
  static const std::regex re(
      "^t([0-9]{0,6})(s([0-9]{1,6}))?(o([0-9]{1,2}))?(n([0-9]{1,4})m([0-9]{1,4}))?$");
  return re;
}

bool looks_like_tile(const std::string& seg) {
  return !seg.empty() && seg[0] == 't' &&
         (seg.size() == 1 || std::isdigit(static_cast<unsigned char>(seg[1])));
}

TileSpec parse_tile(std::string_view text, const std::string& seg) {
  std::smatch mt;
  if (!std::regex_match(seg, mt, tile_regex()))
    fail(text, seg, "expected a tile t<T>[s<S>[o<K>]][n<N>m<M>] (t or t0 for a channel)");
  TileSpec t;
  auto num = [](const std::string& s) {
    int v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
  };
  t.size = mt[1].length() ? num(mt[1]) : 0;
  t.sub = mt[3].matched ? num(mt[3]) : 0;
  t.offset = mt[5].matched ? num(mt[5]) : 0;
  if (mt[6].matched) {
    t.n = num(mt[7]);
    t.m = num(mt[8]);
  }
  if (!t.channel() && (!is_pow2(t.size) || t.size < 2 || t.size > 1024))
    fail(text, seg, "tile size must be a power of two from 2 to 1024 (t or t0 for a channel)");
  if (mt[3].matched) {
    if (t.channel()) fail(text, seg, "a channel (t0) cannot have subtiles");
    if (!is_pow2(t.sub) || t.sub >= t.size)
      fail(text, seg, "subtile size must be a power of two smaller than the tile");
  }
  if (mt[4].matched) {
    if (!mt[3].matched) fail(text, seg, "an exponent offset o<K> needs a subtile s<S> before it");
    if (t.offset < 1 || t.offset > 2)
      fail(text, seg, "subtile exponent offsets are 1 or 2 bits (o1 or o2), as in TensorCast");
  }
  if (mt[6].matched) {
    if (t.m < 2 || t.m > 256 || !is_pow2(t.m))
      fail(text, seg, "sparsity block M must be a power of two from 2 to 256");
    if (t.n < 1 || t.n >= t.m) fail(text, seg, "sparsity needs 1 <= N < M (keep N of every M)");
    if (!t.channel() && t.size % t.m != 0)
      fail(text, seg, "sparsity block M must divide the tile size");
  }
  return t;
}

}  // namespace

std::string TileSpec::str() const {
  std::string s = "t" + std::to_string(size);
  if (sub) s += "s" + std::to_string(sub);
  if (offset) s += "o" + std::to_string(offset);
  if (m) s += "n" + std::to_string(n) + "m" + std::to_string(m);
  return s;
}

std::string ScaleSpec::str() const {
  std::string s = scale.name();
  if (second) s += "_" + second->name();
  for (const TileSpec& t : tiles) s += "_" + t.str();
  return s;
}

DataType DataType::make(NumberSpec number, std::optional<ScaleSpec> scale, std::string name) {
  DataType d;
  d.number_ = std::move(number);
  d.scale_ = std::move(scale);
  d.name_ = std::move(name);
  d.validate(d.str());
  return d;
}

DataType DataType::parse(std::string_view text) {
  const std::string s = lower_trim(text);
  if (s.empty()) fail(text, "", "empty datatype string");
  if (s.size() > 256) fail(text, "", "datatype string is too long");
  if (const RegistryEntry* e = find_registry(s)) {
    DataType d;
    if (e->name == "tcfp8" || e->name == "tcfp12" || e->name == "tcfp16") {
      d.family_ = e->name == "tcfp8"    ? Family::TCFP8
                  : e->name == "tcfp12" ? Family::TCFP12
                                        : Family::TCFP16;
      d.number_ = NumberSpec::parse("e4m3fn");
      d.scale_ = ScaleSpec{NumberSpec::parse("e8m0"), std::nullopt, {TileSpec{32}}};
    } else if (e->group == kGgmlGroup) {
      // The element and scale specs describe the block for display (a float16 scale, and a
      // float16 minimum for the types with one, per block); the cast is ggml's own.
      // Registry names are the GGUF type names in lower case, except mxfp4_ggml (ggml's MXFP4:
      // a bare "mxfp4" would not say which of the two MXFP4 roundings it is).
      std::string up = e->name == "mxfp4_ggml" ? "MXFP4" : e->name == "nvfp4_ggml" ? "NVFP4" : "";
      if (up.empty())
        for (char ch : e->name)
          up += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      const ggml::TypeInfo* g = ggml::type_by_name(up);
      d.family_ = Family::GGML;
      d.ggml_type_ = g->id;
      // q<bits>_0, q3_k and q6_k are signed codes around zero, q<bits>_1, q2_k, q4_k and q5_k
      // unsigned codes above a minimum, tq* ternary.
      const bool affine = (e->name.back() == '1' && e->name[0] == 'q') || e->name == "q2_k" ||
                          e->name == "q4_k" || e->name == "q5_k";
      const std::string bits =
          e->name[0] == 't' ? "2" : std::string(1, e->name[e->name.find_first_of("0123456789")]);
      if (up == "MXFP4") {
        d.number_ = NumberSpec::parse("e2m1fnuz");
        d.scale_ = ScaleSpec{NumberSpec::parse("e8m0"), std::nullopt, {TileSpec{32}}};
      } else if (up == "NVFP4") {
        d.number_ = NumberSpec::parse("e2m1fnuz");
        d.scale_ = ScaleSpec{NumberSpec::parse("e4m3fn"), std::nullopt, {TileSpec{16}}};
      } else if (up == "Q1_0") {  // signs: shown as the two codes of a 2-bit integer
        d.number_ = NumberSpec::parse("int2");
        d.scale_ = ScaleSpec{NumberSpec::parse("float16"), std::nullopt, {TileSpec{128}}};
      } else {
        d.number_ = NumberSpec::parse((affine ? "uint" : "int") + bits);
        d.scale_ = ScaleSpec{
            NumberSpec::parse("float16"),
            affine ? std::optional<NumberSpec>(NumberSpec::parse("float16")) : std::nullopt,
            {TileSpec{static_cast<int>(g->block)}}};
      }
    } else {
      d = parse_grammar(e->spec);
    }
    d.name_ = e->name;
    return d;
  }
  DataType d = parse_grammar(s);
  for (const RegistryEntry& r : registry())
    if (r.spec == d.str()) {
      d.name_ = r.name;
      break;
    }
  return d;
}

DataType DataType::parse_grammar(std::string_view text) {
  const std::string s = lower_trim(text);
  std::vector<std::string> segs = split(s, '_');
  for (const std::string& seg : segs)
    if (seg.empty())
      fail(text, "", "empty segment (two underscores in a row, or a leading/trailing underscore)");
  // Framework names (float8_e4m3fn, float4_e2m1fn_x2) contain underscores: the number spec is
  // the shortest prefix of segments that parses as one.
  DataType d;
  size_t used = 0;
  std::string first_error;
  if (is_codebook_head(segs[0])) {
    if (segs.size() < 2)
      fail(text, segs[0], "a codebook needs its compute format after it (e.g. icb44fi_e4m3fn)");
    const bool labelled = segs.size() > 2 && is_codebook_label(segs[2]);
    try {
      d.codebook_ = make_codebook(segs[0], segs[1], labelled ? segs[2] : "");
    } catch (const Error& e) {
      fail(text, segs[0], e.what());
    }
    d.family_ = Family::Codebook;
    d.number_ = d.codebook_->compute;
    used = labelled ? 3 : 2;
  }
  for (size_t k = 1; used == 0 && k <= segs.size() && k <= 3; ++k) {
    std::string cand = segs[0];
    for (size_t i = 1; i < k; ++i) cand += "_" + segs[i];
    try {
      d.number_ = NumberSpec::parse(cand);
      used = k;
      break;
    } catch (const Error& e) {
      if (k == 1) first_error = e.what();
    }
  }
  if (used == 0) fail(text, segs[0], first_error.substr(first_error.find(": ") + 2));
  if (used < segs.size()) {
    ScaleSpec sc;
    int nspecs = 0;
    for (size_t i = used; i < segs.size(); ++i) {
      const std::string& seg = segs[i];
      if (looks_like_tile(seg)) {
        if (nspecs == 0)
          fail(text, seg, "a tile needs a scale number format before it (e.g. e8m0_t32)");
        if (sc.tiles.size() == 2) fail(text, seg, "at most two tile segments (a 2-D tile)");
        sc.tiles.push_back(parse_tile(text, seg));
        continue;
      }
      if (!sc.tiles.empty()) fail(text, seg, "number formats must come before the tile segments");
      if (nspecs == 2)
        fail(text, seg,
             "at most two scale number formats (scale, then zero point or tensor scale)");
      NumberSpec n;
      try {
        n = NumberSpec::parse(seg);
      } catch (const Error& e) {
        std::string w = e.what();
        fail(text, seg, w.substr(w.find(": ") + 2));
      }
      if (nspecs == 0)
        sc.scale = n;
      else
        sc.second = n;
      ++nspecs;
    }
    // A subtile written without an offset (t16s2, how MX9 / MX6 / MX4 were spelled before) is a
    // 1-bit offset: the datatype's meaning and its files stay the same. A codebook's subtiles
    // choose mappings and carry no offset.
    if (d.family_ != Family::Codebook && !sc.tiles.empty() && sc.tiles.back().sub &&
        !sc.tiles.back().offset)
      sc.tiles.back().offset = 1;
    d.scale_ = sc;
  }
  d.validate(text);
  return d;
}

void DataType::validate(std::string_view text) const {
  if (family_ == Family::Codebook) {
    const std::string cb = codebook_->str();
    if (!scale_ || scale_->tiles.size() != 1 || scale_->tiles[0].channel())
      fail(text, cb, "a codebook needs one 1-D tile scale (e.g. " + cb + "_e8m0_t32)");
    const ScaleSpec& sc = *scale_;
    if (!(sc.scale.is_exponent() || sc.scale.is_float()))
      fail(text, sc.scale.name(), "a codebook's scale must be an exponent or float format");
    if (sc.second) fail(text, sc.second->name(), "codebooks take one scale (no second scale)");
    if (sc.tiles[0].sparse()) fail(text, sc.tiles[0].str(), "codebooks do not take N:M sparsity");
    if (!(sc.tiles[0] == TileSpec{sc.tiles[0].size, sc.tiles[0].sub}))
      fail(text, sc.tiles[0].str(), "codebook tiles take a size and an s<N> subtile only");
    return;
  }
  if (family_ != Family::Standard) return;
  const NumberSpec& n = number_;
  if (!scale_) {
    if (n.is_int() || n.is_uint())
      fail(text, n.name(),
           "integer data needs a scale (e.g. " + n.name() + "_float32 or " + n.name() +
               "_e8m0_t32)");
    return;
  }
  const ScaleSpec& sc = *scale_;
  const std::string sname = sc.scale.name();
  if (n.is_exponent()) fail(text, n.name(), "exponent formats (eXm0) are scales, not scaled data");
  if (sc.scale.is_int() || sc.scale.is_uint())
    fail(text, sname,
         "a scale must be a float or exponent format (integers may only be zero points)");
  if (n.is_uint()) {
    if (!sc.scale.is_float())
      fail(text, sname,
           "unsigned data takes a float scale (exponent scales are for signed and float data)");
    if (!sc.second)
      fail(text, sname,
           "unsigned data is asymmetric: give a zero point format after the scale (e.g. "
           "uint8_float16_int8)");
    if (sc.second->is_exponent() || sc.second->is_uint())
      fail(text, sc.second->name(), "a zero point must be a float or signed integer format");
  } else if (sc.second) {
    if (!(sc.second->is_float() || sc.second->is_exponent()))
      fail(text, sc.second->name(), "a tensor scale must be a float or exponent format");
    if (sc.tiles.empty())
      fail(text, sc.second->name(),
           "a second scale is a tensor scale and needs a tile or channel scale beside it");
  }
  int channels = 0, sparse = 0;
  for (size_t i = 0; i < sc.tiles.size(); ++i) {
    const TileSpec& t = sc.tiles[i];
    channels += t.channel();
    sparse += t.sparse();
    if (t.sub) {
      if (!sc.scale.is_exponent())
        fail(text, t.str(),
             "subtiles carry an exponent offset and need an exponent scale (e.g. e8m0)");
      if (t.offset < 1 || t.offset > 2)
        fail(text, t.str(), "subtile exponent offsets are 1 or 2 bits (o1 or o2)");
      if (i + 1 != sc.tiles.size())
        fail(text, t.str(), "only the last tile segment may have subtiles");
    }
  }
  if (channels > 1) fail(text, sc.tiles[1].str(), "at most one channel segment in a 2-D tile");
  if (sparse > 1)
    fail(text, sc.tiles[1].str(),
         "N:M sparsity in one tile dimension only (2-D sparsity is not supported)");
}

std::string DataType::label() const {
  if (!name_.empty() && name_ != str()) return name_ + " (" + str() + ")";
  return str();
}

const TileSpec* DataType::sparse_tile() const {
  if (!scale_) return nullptr;
  for (const TileSpec& t : scale_->tiles)
    if (t.sparse()) return &t;
  return nullptr;
}

const TileSpec* DataType::subtile() const {
  if (!scale_ || scale_->tiles.empty() || !scale_->tiles.back().sub) return nullptr;
  return &scale_->tiles.back();
}

namespace detail {

// The text and size facts of each family, for its row of the family table.

double tiles_per_value(int64_t L, int64_t T) {
  if (T <= 0) return L > 0 ? 1.0 / static_cast<double>(L) : 0.0;  // one tile per row
  return L > 0 ? static_cast<double>((L + T - 1) / T) / static_cast<double>(L) : 1.0 / T;
}

std::string standard_str(const DataType& d) {
  std::string s = d.number().name();
  if (d.scale()) s += "_" + d.scale()->str();
  return s;
}

double standard_bits_per_value(const DataType& d, int64_t channel_length) {
  double bits = d.number().bits();
  if (!d.scale()) return bits;
  const ScaleSpec& sc = *d.scale();
  double elems = 1;  // elements sharing one scale
  bool unknown = false;
  for (size_t i = 0; i < sc.tiles.size(); ++i) {
    const TileSpec& t = sc.tiles[i];
    const bool along_axis = i + 1 == sc.tiles.size();  // a 2-D tile's last segment
    if (t.channel()) {
      if (channel_length > 0)
        elems *= static_cast<double>(channel_length);
      else
        unknown = true;
    } else if (along_axis && channel_length > 0) {
      // ceil(L / T) tiles cover an axis of L values; a partial tile carries a whole scale.
      elems *= static_cast<double>(channel_length) /
               static_cast<double>((channel_length + t.size - 1) / t.size);
    } else {
      elems *= t.size;
    }
  }
  if (const TileSpec* sp = d.sparse_tile()) {
    // Kept values + a mask bit; along the axis, a partial run keeps N slots too.
    const bool along_axis = sp == &sc.tiles.back();
    bits = (along_axis ? bits * sp->n * tiles_per_value(channel_length, sp->m)
                       : bits * sp->n / sp->m) +
           1.0;
  }
  if (sc.tiles.empty()) return bits;  // one tensor scale: nothing per value
  double per_group = sc.scale.bits();
  if (d.has_zero_point()) per_group += sc.second->bits();
  if (!unknown) bits += per_group / elems;
  // A partial last tile still has T / sub offsets.
  if (const TileSpec* st = d.subtile())
    bits += st->size > 0 ? static_cast<double>(st->offset) * (st->size / st->sub) *
                               tiles_per_value(channel_length, st->size)
                         : static_cast<double>(st->offset) / st->sub;
  return bits;
}

std::string standard_describe(const DataType& d) {
  std::ostringstream o;
  o << d.number().name() << " values";
  if (!d.scale()) {
    o << ", unscaled";
    return o.str();
  }
  const ScaleSpec& sc = *d.scale();
  o << ", " << sc.scale.name() << " scale";
  if (d.has_zero_point())
    o << " and " << sc.second->name() << " zero point";
  else if (sc.second)
    o << " with a " << sc.second->name() << " tensor scale";
  if (sc.tiles.empty()) o << " per tensor";
  auto one = [](const TileSpec& t) {
    std::string s = t.channel() ? std::string("channel") : std::to_string(t.size);
    if (t.sub)
      s += " (subtiles of " + std::to_string(t.sub) + " with a " + std::to_string(t.offset) +
           "-bit exponent offset)";
    if (t.m) s += " (" + std::to_string(t.n) + ":" + std::to_string(t.m) + " sparse)";
    return s;
  };
  if (sc.tiles.size() == 1)
    o << " per " << (sc.tiles[0].channel() ? "channel" : "tile of " + one(sc.tiles[0]))
      << " along the tile axis";
  if (sc.tiles.size() == 2) o << " per 2-D tile " << one(sc.tiles[0]) << " x " << one(sc.tiles[1]);
  return o.str();
}

std::string codebook_str(const DataType& d) {
  return d.codebook()->str() + (d.scale() ? "_" + d.scale()->str() : "");
}

double codebook_bits_per_value(const DataType& d, int64_t channel_length) {
  const ScaleSpec& sc = *d.scale();
  const TileSpec& t = sc.tiles[0];
  const int64_t sub = t.sub ? t.sub : t.size;
  const double tiles = tiles_per_value(channel_length, t.size);
  return d.codebook()->index_bits + sc.scale.bits() * tiles +
         static_cast<double>(d.codebook()->meta_bits) * (t.size / sub) * tiles;
}

std::string codebook_describe(const DataType& d) {
  const ScaleSpec& sc = *d.scale();
  const TileSpec& t = sc.tiles[0];
  std::ostringstream o;
  o << "codebook " << d.codebook()->str() << ": " << d.codebook()->index_bits
    << "-bit indices into " << d.codebook()->num_maps() << " mappings of " << d.number().name()
    << " values, " << sc.scale.name() << " scale per tile of " << t.size << ", mapping chosen per "
    << (t.sub ? "subtile of " + std::to_string(t.sub) : std::string("tile"));
  return o.str();
}

std::string ggml_str(const DataType& d) {
  return d.name();
}

double ggml_bits_per_value(const DataType& d, int64_t) {
  const ggml::TypeInfo* g = ggml::type_info(d.ggml_type());
  return 8.0 * g->block_bytes / g->block;
}

std::string ggml_describe(const DataType& d) {
  if (const RegistryEntry* e = find_registry(d.name())) return e->description;
  return d.name();
}

}  // namespace detail

}  // namespace castscope
