#include "castscope/codebook.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

namespace castscope {
namespace {

[[noreturn]] void fail(std::string_view what, const std::string& why) {
  throw Error("codebook '" + std::string(what) + "': " + why);
}

bool all_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Positive finite magnitudes of the compute format, largest first: TensorCast's number line seen
// from -max towards zero, where the pattern indices of docs/codebook.md live.
std::vector<double> magnitudes_desc(const NumberSpec& n) {
  std::vector<double> v;
  for (const CodeValue& cv : n.enumerate())
    if (std::isfinite(cv.value) && cv.value > 0) v.push_back(cv.value);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::reverse(v.begin(), v.end());
  return v;
}

struct Variant {
  std::string name;        // mapping name stem: "f", "i", "p2", "s3", "fe1"
  std::vector<int> ranks;  // positions below the top of the number line, largest value first
  int offset = 0;          // reported in the mapping name, as TensorCast does
};

// Ranks of the f (fp<I>, e2m<I-3>) and i (int<I>) patterns: their positive values scaled so that
// the pattern's max lands on the compute format's top binade, then moved to the top of the line.
std::vector<int> fi_ranks(std::string_view spec, char letter, int index_bits,
                          const NumberSpec& compute, const std::vector<double>& desc) {
  std::vector<double> vals;  // positive pattern values, largest first
  if (letter == 'f') {
    if (index_bits < 3 || index_bits > 5)
      fail(spec, "an f clause needs 3, 4 or 5 index bits (fp3 / fp4 / fp5 patterns)");
    const int m = index_bits - 3;  // e2m<m>: bias 1, binades 0..2, no Inf / NaN
    for (int e = 2; e >= 0; --e)
      for (int k = (1 << m) - 1; k >= 0; --k)
        vals.push_back(std::ldexp(1.0 + std::ldexp(k, -m), e));
    for (int k = (1 << m) - 1; k >= 1; --k) vals.push_back(std::ldexp(k, -m));
  } else {
    if (index_bits < 3 || index_bits > 5)
      fail(spec, "an i clause needs 3, 4 or 5 index bits (int3 / int4 / int5 patterns)");
    for (int k = (1 << (index_bits - 1)) - 1; k >= 1; --k)
      vals.push_back(std::ldexp(k, -(index_bits - 2)));
  }
  const int pattern_emax = letter == 'f' ? 2 : 0;
  std::vector<int> ranks;
  for (double v : vals) {
    const double s = std::ldexp(v, compute.emax() - pattern_emax);
    auto it = std::find(desc.begin(), desc.end(), s);
    if (it == desc.end()) {
      std::ostringstream o;
      o << "the " << letter << " pattern value " << s << " is not representable in "
        << compute.name();
      fail(spec, o.str());
    }
    ranks.push_back(static_cast<int>(it - desc.begin()));
  }
  const int top = ranks.front();
  for (int& r : ranks) r -= top;
  return ranks;
}

std::vector<Variant> parse_clauses(std::string_view spec, std::string_view clauses, int index_bits,
                                   const NumberSpec& compute, const std::vector<double>& desc) {
  const int num_pos = (1 << (index_bits - 1)) - 1;
  std::vector<Variant> out;
  size_t i = 0;
  if (clauses.empty()) fail(spec, "an implicit codebook needs pattern clauses (f, i, p or s)");
  while (i < clauses.size()) {
    const char c = clauses[i++];
    if (c != 'f' && c != 'i' && c != 'p' && c != 's')
      fail(spec, std::string("unexpected '") + c +
                     "' in the pattern clauses (expected f, i, p or s, each with optional digits "
                     "and an e modifier)");
    std::string digits;
    while (i < clauses.size() && std::isdigit(static_cast<unsigned char>(clauses[i])))
      digits += clauses[i++];
    const bool fi = c == 'f' || c == 'i';
    if (digits.size() > (fi ? 1u : 2u))
      fail(spec, std::string("clause '") + c + digits + "': " +
                     (fi ? "f and i take one digit, the offset from the top of the number line"
                         : "p and s take two digits, the interval and the offset"));
    std::string edigits;
    bool has_e = false;
    if (i < clauses.size() && clauses[i] == 'e') {
      has_e = true;
      ++i;
      while (i < clauses.size() && std::isdigit(static_cast<unsigned char>(clauses[i])))
        edigits += clauses[i++];
      if (edigits.empty()) edigits = "01";
      for (char d : edigits)
        if (d > '3')
          fail(spec, std::string("e modifier digit '") + d + "': exponent offsets are 0 to 3");
    }
    Variant base;
    if (fi) {
      base.ranks = fi_ranks(spec, c, index_bits, compute, desc);
      base.offset = digits.empty() ? 0 : digits[0] - '0';
      for (int& r : base.ranks) r += base.offset;
      base.name = std::string(1, c);
    } else {
      // TensorCast: the first digit plus one is the initial step, the second the starting offset.
      int incr = digits.empty() ? 1 : digits[0] - '0' + 1;
      base.offset = digits.size() > 1 ? digits[1] - '0' : 0;
      base.name = std::string(1, c) + std::to_string(incr);
      int idx = base.offset;
      for (int k = 0; k < num_pos; ++k) {
        base.ranks.push_back(idx);
        idx += incr;
        if (c == 'p') ++incr;
      }
    }
    if (!has_e) {
      out.push_back(base);
      continue;
    }
    // e<d>: the pattern one binade (2^mbits positions) lower per step, for subtiles whose values
    // sit below the tile's scale.
    for (char d : edigits) {
      Variant v = base;
      const int shift = (d - '0') << compute.mbits();
      for (int& r : v.ranks) r += shift;
      v.name = base.name + "e" + std::string(1, d);
      out.push_back(v);
    }
  }
  return out;
}

void build_implicit(std::string_view spec, Codebook& cb) {
  const std::vector<double> desc = magnitudes_desc(cb.compute);
  const int npos_line = static_cast<int>(desc.size());
  std::vector<Variant> vars = parse_clauses(spec, cb.clauses, cb.index_bits, cb.compute, desc);
  const int nmaps = cb.num_maps();
  int pow2 = 1;
  while (pow2 < static_cast<int>(vars.size())) pow2 <<= 1;
  if (pow2 != static_cast<int>(vars.size()) || pow2 > nmaps)
    fail(spec, "the clauses give " + std::to_string(vars.size()) +
                   " patterns; it must be a power of two no larger than the " +
                   std::to_string(nmaps) + " mappings of " + std::to_string(cb.meta_bits) +
                   " meta bits");
  const int shifts = nmaps / pow2;
  // TensorCast spaces the shifted copies two positions apart when that still fits in a binade.
  const int step = cb.meta_bits > 1 && shifts < (1 << cb.compute.mbits()) ? 2 : 1;
  const int half = cb.num_values() / 2;
  for (const Variant& v : vars) {
    for (int s = 0; s < shifts; ++s) {
      const int shift = s * step;
      std::vector<double> neg;  // negative half, ascending
      for (int r : v.ranks)
        if (r + shift >= 0 && r + shift < npos_line) neg.push_back(-desc[r + shift]);
      while (static_cast<int>(neg.size()) < half) neg.push_back(-0.0);
      std::vector<double> m = neg;
      for (auto it = neg.rbegin(); it != neg.rend(); ++it) m.push_back(-*it);
      cb.maps.push_back(m);
      cb.names.push_back(v.name + "_" + std::to_string(shift + v.offset));
    }
  }
}

std::mutex& table_mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::shared_ptr<const Codebook>>& tables() {
  static std::map<std::string, std::shared_ptr<const Codebook>> t;
  return t;
}

struct Head {
  bool implicit = false;
  int index_bits = 0, meta_bits = 0;
  std::string clauses;
};

Head parse_head(std::string_view head) {
  Head h;
  std::string_view rest;
  if (head.rfind("icb", 0) == 0) {
    h.implicit = true;
    rest = head.substr(3);
  } else if (head.rfind("cb", 0) == 0) {
    rest = head.substr(2);
  } else {
    fail(head, "a codebook starts with cb (tables from a file) or icb (implicit patterns)");
  }
  if (rest.size() < 2 || !std::isdigit(static_cast<unsigned char>(rest[0])) ||
      !std::isdigit(static_cast<unsigned char>(rest[1])))
    fail(head, "expected two digits after " + std::string(h.implicit ? "icb" : "cb") +
                   ": index bits and meta bits (e.g. icb44fi)");
  h.index_bits = rest[0] - '0';
  h.meta_bits = rest[1] - '0';
  h.clauses = std::string(rest.substr(2));
  if (h.index_bits < 2 || h.index_bits > 8) fail(head, "index bits must be 2 to 8");
  if (h.meta_bits < 1 || h.meta_bits > 8) fail(head, "meta bits must be 1 to 8");
  if (!h.implicit && !h.clauses.empty())
    fail(head, "pattern clauses ('" + h.clauses + "') belong to implicit codebooks: write icb" +
                   std::string(rest.substr(0, 2)) + h.clauses);
  return h;
}

NumberSpec parse_compute(std::string_view spec, std::string_view compute) {
  NumberSpec n;
  try {
    n = NumberSpec::parse(compute);
  } catch (const Error& e) {
    fail(spec, std::string("compute format: ") + e.what());
  }
  if (!n.is_float() || n.bits() > 8)
    fail(spec, "the compute format must be a float format of at most 8 bits, not " + n.name());
  return n;
}

}  // namespace

std::string Codebook::str() const {
  std::string s = (implicit ? "icb" : "cb") + std::to_string(index_bits) +
                  std::to_string(meta_bits) + clauses + "_" + compute.name();
  if (!label.empty()) s += "_" + label;
  return s;
}

bool Codebook::operator==(const Codebook& o) const {
  return index_bits == o.index_bits && meta_bits == o.meta_bits && implicit == o.implicit &&
         clauses == o.clauses && label == o.label && compute == o.compute && maps == o.maps;
}

bool is_codebook_head(std::string_view s) {
  return (s.size() >= 4 && s.rfind("cb", 0) == 0 && all_digits(s.substr(2, 2))) ||
         (s.size() >= 5 && s.rfind("icb", 0) == 0 && all_digits(s.substr(3, 2)));
}

bool is_codebook_label(std::string_view s) {
  if (s.empty() || s.size() > 32 || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  if (s[0] == 't' && (s.size() == 1 || std::isdigit(static_cast<unsigned char>(s[1]))))
    return false;
  try {
    NumberSpec::parse(s);
    return false;
  } catch (const Error&) {
    return true;
  }
}

std::shared_ptr<const Codebook> make_codebook(std::string_view head, std::string_view compute,
                                              std::string_view label) {
  const Head h = parse_head(head);
  auto cb = std::make_shared<Codebook>();
  cb->implicit = h.implicit;
  cb->index_bits = h.index_bits;
  cb->meta_bits = h.meta_bits;
  cb->clauses = h.clauses;
  cb->label = std::string(label);
  cb->compute = parse_compute(head, compute);
  if (!label.empty() && !is_codebook_label(label))
    fail(cb->str(), "label '" + std::string(label) +
                        "' must be letters and digits, start with a letter, and not be a number "
                        "format or tile");
  if (cb->implicit) {
    build_implicit(cb->str(), *cb);
    return cb;
  }
  std::lock_guard<std::mutex> lock(table_mu());
  auto it = tables().find(cb->str());
  if (it == tables().end())
    fail(cb->str(),
         "no tables are loaded for this generic codebook: load its table file first "
         "(castscope-cli --codebook FILE.json; format in docs/formats.md)");
  return it->second;
}

std::shared_ptr<const Codebook> register_codebook(const std::string& spec,
                                                  const std::vector<std::vector<double>>& maps,
                                                  const std::vector<std::string>& names,
                                                  const std::string& where) {
  auto at = [&](const std::string& why) -> Error { return Error(where + ": " + why); };
  std::vector<std::string> segs;
  {
    std::string cur;
    for (char c : spec) {
      const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (l == '_') {
        segs.push_back(cur);
        cur.clear();
      } else {
        cur += l;
      }
    }
    segs.push_back(cur);
  }
  if (segs.size() < 2 || segs.size() > 3)
    throw at("field 'codebook': expected cb<I><M>_<compute>[_<label>], got '" + spec + "'");
  Head h;
  try {
    h = parse_head(segs[0]);
  } catch (const Error& e) {
    throw at(std::string("field 'codebook': ") + e.what());
  }
  if (h.implicit)
    throw at("field 'codebook': '" + spec +
             "' is implicit (icb...): its tables come from its "
             "pattern clauses, not a file");
  auto cb = std::make_shared<Codebook>();
  cb->index_bits = h.index_bits;
  cb->meta_bits = h.meta_bits;
  try {
    cb->compute = parse_compute(segs[0], segs[1]);
  } catch (const Error& e) {
    throw at(std::string("field 'codebook': ") + e.what());
  }
  if (segs.size() == 3) {
    if (!is_codebook_label(segs[2]))
      throw at("field 'codebook': label '" + segs[2] +
               "' must be letters and digits, start with a letter, and not be a number format");
    cb->label = segs[2];
  }
  const int nmaps = cb->num_maps(), nvals = cb->num_values(), half = nvals / 2;
  if (static_cast<int>(maps.size()) != nmaps)
    throw at("field 'mappings': " + std::to_string(maps.size()) + " mappings, expected " +
             std::to_string(nmaps) + " (2^" + std::to_string(cb->meta_bits) + ")");
  if (!names.empty() && static_cast<int>(names.size()) != nmaps)
    throw at("field 'names': " + std::to_string(names.size()) + " names for " +
             std::to_string(nmaps) + " mappings");
  const scalar::Format& f = cb->compute.format();
  for (int m = 0; m < nmaps; ++m) {
    const std::string mm = "field 'mappings'[" + std::to_string(m) + "]";
    if (static_cast<int>(maps[m].size()) != nvals)
      throw at(mm + ": " + std::to_string(maps[m].size()) + " values, expected " +
               std::to_string(nvals) + " (2^" + std::to_string(cb->index_bits) + ")");
    std::vector<double> row(nvals);
    for (int j = 0; j < nvals; ++j) {
      const double v = maps[m][j];
      const scalar::Quantized q =
          scalar::quantize(v, f, scalar::Round::Even, scalar::Overflow::IEEE, 0);
      if (!std::isfinite(v) || q.inf || q.nan || std::fabs(scalar::value_of(q, 0)) != std::fabs(v))
        throw at(mm + "[" + std::to_string(j) + "]: " + std::to_string(v) +
                 " is not a finite value of " + cb->compute.name());
      if (j > 0 && v < maps[m][j - 1]) throw at(mm + ": values must be in ascending order");
      row[j] = v;
    }
    // Casting rounds magnitudes and keeps the input's sign (TensorCast), so a mapping is
    // mirror-symmetric with zero at its centre.
    if (row[half] != 0.0)
      throw at(mm + ": the centre entries " + std::to_string(half - 1) + " and " +
               std::to_string(half) + " must be -0 and 0");
    for (int j = 0; j < half; ++j) {
      if (row[half - 1 - j] != -row[half + j])
        throw at(mm + ": entry " + std::to_string(half - 1 - j) +
                 " must be the negative of entry " + std::to_string(half + j) +
                 " (mappings are mirror-symmetric)");
      row[half + j] = std::fabs(row[half + j]);
      row[half - 1 - j] = -row[half + j];
    }
    cb->maps.push_back(row);
    cb->names.push_back(names.empty() ? "m" + std::to_string(m) : names[m]);
  }
  std::lock_guard<std::mutex> lock(table_mu());
  auto it = tables().find(cb->str());
  if (it != tables().end() && !(*it->second == *cb))
    throw at("codebook '" + cb->str() + "' is already loaded with other tables");
  tables()[cb->str()] = cb;
  return cb;
}

std::shared_ptr<const Codebook> load_codebook_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("codebook file '" + path + "': cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("codebook file '" + path + "': not valid JSON (" + e.what() + ")");
  }
  const std::string where = "codebook file '" + path + "'";
  if (!j.is_object() || !j.contains("codebook") || !j["codebook"].is_string())
    throw Error(where + ": field 'codebook' (a string such as \"cb42_e4m3fn_mine\") is missing");
  if (!j.contains("mappings") || !j["mappings"].is_array())
    throw Error(where + ": field 'mappings' (a list of lists of values) is missing");
  std::vector<std::vector<double>> maps;
  for (size_t m = 0; m < j["mappings"].size(); ++m) {
    const auto& row = j["mappings"][m];
    if (!row.is_array())
      throw Error(where + ": field 'mappings'[" + std::to_string(m) + "] is not a list");
    std::vector<double> r;
    for (size_t k = 0; k < row.size(); ++k) {
      if (!row[k].is_number())
        throw Error(where + ": field 'mappings'[" + std::to_string(m) + "][" + std::to_string(k) +
                    "] is not a number");
      r.push_back(row[k].get<double>());
    }
    maps.push_back(r);
  }
  std::vector<std::string> names;
  if (j.contains("names")) {
    if (!j["names"].is_array()) throw Error(where + ": field 'names' is not a list of strings");
    for (const auto& n : j["names"]) {
      if (!n.is_string()) throw Error(where + ": field 'names' is not a list of strings");
      names.push_back(n.get<std::string>());
    }
  }
  return register_codebook(j["codebook"].get<std::string>(), maps, names, where);
}

}  // namespace castscope
