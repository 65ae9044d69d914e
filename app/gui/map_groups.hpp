// How the model map groups its rows: by numbered layer where the engine found one, else by the
// tensor's scope (ONNX node path, Paddle-style op name).
#pragma once

#include <string>

#include "castscope/modelmap.hpp"

namespace castscope::gui {

// The group a row is listed under ("" : outside any layer or scope).
std::string map_group(const MapRow& r);

}  // namespace castscope::gui
