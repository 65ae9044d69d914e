#include "io/json_fields.hpp"

#include <charconv>
#include <cmath>

#include "castscope/error.hpp"

namespace castscope::io::detail {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& why) {
  throw Error((file.empty() ? "" : "'" + file + "': ") + field + ": " + why);
}

// A short rendering of an offending value: fuzzed headers carry numbers hundreds of digits long.
std::string shown(const std::string& s) {
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

}  // namespace

int64_t json_integer(const json& v, const std::string& file, const std::string& field, int64_t lo,
                     int64_t hi) {
  const std::string range =
      " (expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "])";
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi))
      fail(file, field, shown(v.dump()) + " is out of range" + range);
    const auto s = static_cast<int64_t>(u);
    if (s < lo) fail(file, field, shown(v.dump()) + " is out of range" + range);
    return s;
  }
  if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if (s < lo || s > hi) fail(file, field, shown(v.dump()) + " is out of range" + range);
    return s;
  }
  // nlohmann stores integers beyond 64 bits as doubles: call those out of range, not fractional.
  if (v.is_number_float() && std::fabs(v.get<double>()) >= 0x1p63)
    fail(file, field, shown(v.dump()) + " is out of range" + range);
  fail(file, field, shown(v.dump()) + " is not an integer" + range);
}

uint64_t json_unsigned(const json& v, const std::string& file, const std::string& field,
                       uint64_t hi) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail(file, field, shown(v.dump()) + " is not a non-negative integer");
  const uint64_t u = v.get<uint64_t>();
  if (u > hi)
    fail(file, field, shown(v.dump()) + " is out of range (at most " + std::to_string(hi) + ")");
  return u;
}

Shape json_shape(const json& v, const std::string& file, const std::string& field) {
  if (!v.is_array()) fail(file, field, shown(v.dump()) + " is not a list of dimensions");
  if (v.size() > 64) fail(file, field, "absurd rank " + std::to_string(v.size()));
  Shape s;
  s.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    s.push_back(
        json_integer(v[i], file, field + " dimension " + std::to_string(i), 0, kMaxHeaderDim));
  return s;
}

int64_t text_integer(const std::string& text, const std::string& file, const std::string& field,
                     int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == end && (v < lo || v > hi)))
    fail(file, field,
         "'" + shown(text) + "' is out of range (expected an integer in [" + std::to_string(lo) +
             ", " + std::to_string(hi) + "])");
  if (ec != std::errc() || p != end || text.empty())
    fail(file, field, "'" + shown(text) + "' is not an integer");
  return v;
}

uint64_t text_unsigned(const std::string& text, const std::string& file, const std::string& field) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range)
    fail(file, field, "'" + shown(text) + "' is out of range (at most 2^64-1)");
  if (ec != std::errc() || p != end || text.empty())
    fail(file, field, "'" + shown(text) + "' is not a non-negative integer");
  return v;
}

Shape text_shape(const std::string& text, const std::string& file, const std::string& field) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    fail(file, field, "'" + shown(text) + "' is not a JSON list of dimensions");
  }
  return json_shape(j, file, field);
}

}  // namespace castscope::io::detail
