#include "map_groups.hpp"

namespace castscope::gui {

// The group a row is listed under. Numbered layers come from the engine ("model.layers.3");
// names without them are grouped by their scope: an ONNX node path ("/encoder/conv1/Conv" under
// "/encoder/conv1") or a Paddle-style op name ("linear_85.w_0" under "linear_*").
std::string map_group(const MapRow& r) {
  if (!r.group.empty()) return r.group;
  const size_t slash = r.name.rfind('/');
  if (slash != std::string::npos && slash > 0) return r.name.substr(0, slash);
  const size_t dot = r.name.find('.');
  const std::string head = r.name.substr(0, dot);
  const size_t us = head.rfind('_');
  if (dot != std::string::npos && us != std::string::npos && us > 0 && us + 1 < head.size() &&
      head.find_first_not_of("0123456789", us + 1) == std::string::npos)
    return head.substr(0, us) + "_*";
  return "";
}

}  // namespace castscope::gui
