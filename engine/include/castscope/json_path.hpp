// The value at a dotted path of a JSON document ("analysis.tiles.0": object keys, and array
// indices as decimal numbers), as the app's scripted sessions and their checker both read the
// app's state. Header-only and templated on the JSON type, like metrics_json.hpp, so that the
// engine's public headers need no JSON library.
#pragma once

#include <cctype>
#include <sstream>
#include <string>

namespace castscope {

// nullptr when a key is missing, an index is out of range or a step is neither.
template <typename Json>
const Json* json_at(const Json& j, const std::string& path) {
  const Json* cur = &j;
  std::istringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (cur->is_object() && cur->contains(part))
      cur = &(*cur)[part];
    else if (cur->is_array() && !part.empty() &&
             std::isdigit(static_cast<unsigned char>(part[0])) && std::stoul(part) < cur->size())
      cur = &(*cur)[std::stoul(part)];
    else
      return nullptr;
  }
  return cur;
}

}  // namespace castscope
