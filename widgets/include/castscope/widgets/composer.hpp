// Datatype composer: edit a datatype field by field or as a string, see it validated live.
#pragma once

#include <string>

#include "castscope/cast.hpp"

namespace castscope::widgets {

struct ComposerState {
  // Number format.
  int kind = 0;  // 0 float, 1 int, 2 uint
  int ebits = 2, mbits = 1, bias = 1;
  bool custom_bias = false;
  int infnan = 2;  // InfNan: 0 ieee, 1 fn, 2 fnuz, 3 finite
  int ibits = 8;
  // Codebook element (instead of a number format): implicit icb<I><M><clauses> or generic
  // cb<I><M> over a compute format, with an optional label.
  bool codebook = false;
  bool cb_implicit = true;
  int cb_index = 4, cb_meta = 4;
  char cb_clauses[32] = "fi";
  char cb_compute[24] = "e4m3fn";
  char cb_label[24] = "";
  // Scaling.
  int scaling = 3;     // 0 none, 1 tensor, 2 channel, 3 1-D tile, 4 2-D tile
  int scale_fmt = 0;   // index into scale_formats()
  int second_fmt = 0;  // 0: none; zero-point format for uint data, tensor scale otherwise
  int tile = 32, tile2 = 32, sub = 0, sp_n = 0, sp_m = 0;
  int offset = 1;  // bits of each subtile's exponent offset (t<T>s<S>o<K>)
  // Cast options.
  Round round = Round::Even;
  ScaleMode scale_mode = ScaleMode::Floor;
  Overflow overflow = Overflow::Saturate;
  // Quantization axis: auto (each tensor's reduction axis, default_axis), an axis, or an axis
  // and every later one flattened into one.
  AxisSpec axis{true, -1, false};

  char text[160] = "mxfp4e2";
  std::string error;  // why the current fields / text do not form a datatype
  // What the datatype costs on the loaded tensor, set by the app each frame and drawn under the
  // nominal figure ("on W [16, 1, 3, 3]: 128 bits per value"), with its label below where the
  // nominal figure differs; empty: nothing loaded.
  std::string tensor_bits, tensor_bits_note;
  DataType dtype = DataType::parse("mxfp4e2");
  bool disabled = false;  // set by the owner while conflicting work runs

  // Loads the fields from a datatype (registry presets and typed strings go through this).
  void set(const DataType& d);
  // Parses `text`; on success updates dtype and the fields, else sets error.
  bool set_text(const std::string& s);
  // The datatype string the fields describe (may fail to parse; error explains).
  std::string fields_string() const;
};

const char* const* scale_formats(int* count);
const char* const* second_formats(int* count);

// The registry's datatypes as selectable items inside an open combo, under their group's heading
// as the registry lists them, `current` shown selected; with `describe`, each one's description
// as its tooltip. The entry picked this frame, or nullptr.
const RegistryEntry* registry_items(const std::string& current, bool describe);

// Draws the composer. Returns true when dtype or a cast option changed to a valid new value.
bool draw_composer(ComposerState& s);

}  // namespace castscope::widgets
