// The one parser from option text to CastOptions (cast.hpp).
#include <string>

#include "castscope/cast.hpp"

namespace castscope {

namespace {

// Runs `set` on a non-empty field; its Error gets the option's name in front.
template <class F>
void field(const std::string& text, std::string_view prefix, const char* name, F&& set) {
  if (text.empty()) return;
  try {
    set(text);
  } catch (const Error& e) {
    throw Error(std::string(prefix) + name + ": " + e.what());
  }
}

}  // namespace

CastOptions parse_cast_options(const CastOptionText& t, const CastOptions& base,
                               std::string_view prefix) {
  CastOptions o = base;
  field(t.mode, prefix, "mode", [&](const std::string& s) { o.mode = parse_cast_mode(s); });
  field(t.round, prefix, "round", [&](const std::string& s) { o.round = parse_round(s); });
  field(t.scale_mode, prefix, prefix == "--" ? "scale-mode" : "scale_mode",
        [&](const std::string& s) { o.scale_mode = parse_scale_mode(s); });
  field(t.overflow, prefix, "overflow",
        [&](const std::string& s) { o.overflow = parse_overflow(s); });
  field(t.axis, prefix, "axis", [&](const std::string& s) { AxisSpec::parse(s).apply(o); });
  field(t.rotate, prefix, "rotate", [&](const std::string& s) { o.rotate = parse_rotation(s); });
  field(t.device, prefix, "device", [&](const std::string& s) { o.device = parse_device(s); });
  return o;
}

}  // namespace castscope
