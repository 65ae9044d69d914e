// ScaleSpec and DataType: the datatype grammar of the spec (NSPEC[_SSPEC]) and the registry of
// predefined datatypes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "castscope/codebook.hpp"
#include "castscope/format.hpp"

namespace castscope {

// One tile segment: t<T>[s<S>[o<K>]][n<N>m<M>]; size 0 is a channel (the whole axis).
struct TileSpec {
  int size = 0;
  int sub = 0;     // subtile size (0: none)
  int offset = 0;  // K: each subtile's K-bit exponent offset below the tile's scale
  int n = 0;       // N:M sparsity: keep n of every m (0: dense)
  int m = 0;
  bool channel() const { return size == 0; }
  bool sparse() const { return m > 0; }
  std::string str() const;
  bool operator==(const TileSpec& o) const {
    return size == o.size && sub == o.sub && offset == o.offset && n == o.n && m == o.m;
  }
};

struct ScaleSpec {
  NumberSpec scale;
  std::optional<NumberSpec> second;  // zero point for uint data, tensor scale otherwise
  std::vector<TileSpec> tiles;       // 0: tensor scale, 1: 1-D tile, 2: 2-D tile (dims -2, -1)
  std::string str() const;
  bool operator==(const ScaleSpec& o) const {
    return scale == o.scale && second == o.second && tiles == o.tiles;
  }
};

// Datatypes outside the TensorCast grammar, with their own cast kernels. GGML: one of ggml's
// block formats (ggml_type() says which), cast with ggml's reference quantizer.
enum class Family { Standard, TCFP8, TCFP12, TCFP16, Codebook, GGML };

// What code outside the engine may ask of a family instead of switching on it: a row of the
// engine's family table (engine/src/families/family_table.cpp).
struct FamilyTraits {
  Family family;
  const char* name;  // "standard", "tcfp8", "tcfp12", "tcfp16", "codebook", "ggml"
  const char* kind;  // what a user calls it: "TensorCast", "TCFP", "codebook", "ggml block"
  // Scales, codes, masks and meta in TensorCast's layout: the tile map, the mask view and the
  // teaching view can show them.
  bool tensorcast_layout;
  // Scales come with the family's blocks whether or not the datatype string names a scale.
  bool block_scaled;
  bool field_form;             // the composer's element / scale fields can build it
  bool device_cast;            // the CUDA backend casts it
  bool device_views;           // the views' statistics can run on the device
  const char* no_tile_map;     // why there is no tile map (null where there can be one)
  const char* element_format;  // the element grid when number() is not it (TCFP: e4m3fn)
  // TensorCast's grammar: number() is the element grid and scale() a TensorCast scale, so the
  // CPU's vectorized paths, the exporters' native layouts, the FP8 GEMM and the tile statistics
  // apply.
  bool grammar;
  int tcfp_bits;             // TCFP-8 / 12 / 16: the bits of its main terms; 0 for the others
  int packed_residual_bits;  // a residual packed below a byte (TCFP-12's int4), 0 for none
  bool gguf_blocks;          // the codes are GGUF blocks of ggml_type(), packed already
};
const FamilyTraits& family_traits(Family f);

class DataType {
 public:
  DataType() = default;
  // Registry names first, then NSPEC or NSPEC_SSPEC. Throws Error naming the offending segment.
  static DataType parse(std::string_view text);
  static DataType make(NumberSpec number, std::optional<ScaleSpec> scale, std::string name = "");

  Family family() const { return family_; }
  const NumberSpec& number() const { return number_; }  // the compute format of a codebook
  // Codebook datatypes: the mappings; null otherwise.
  const std::shared_ptr<const Codebook>& codebook() const { return codebook_; }
  uint32_t ggml_type() const { return ggml_type_; }  // ggml's type id for ggml's blocks
  const std::optional<ScaleSpec>& scale() const { return scale_; }
  bool scaled() const { return scale_.has_value(); }
  // Registry name if the datatype has one, "" otherwise.
  const std::string& name() const { return name_; }
  // Canonical string: the grammar form (tcfp names for the TCFP family). parse(str()) == *this.
  std::string str() const;
  // What to show a person: "mxfp4e2 (e2m1fnuz_e8m0_t32)" or the string alone.
  std::string label() const;

  // Storage bits per value including scale / zero / microexponent / mask overhead. A tensor
  // scale adds nothing per value; a channel scale needs the channel length (0: left out).
  double bits_per_value(int64_t channel_length = 0) const;
  // Human-readable description of the scaling ("1-D tile of 32 along the last axis, ...").
  std::string describe() const;

  // Convenience queries.
  bool has_zero_point() const { return scaled() && number_.is_uint(); }
  bool multiscale() const { return scaled() && scale_->second && !number_.is_uint(); }
  bool tensor_scaled() const { return scaled() && scale_->tiles.empty(); }
  const TileSpec* sparse_tile() const;
  const TileSpec* subtile() const;

  // Semantic equality: the name does not take part.
  bool operator==(const DataType& o) const {
    return family_ == o.family_ && number_ == o.number_ && scale_ == o.scale_ &&
           (codebook_ == o.codebook_ || (codebook_ && o.codebook_ && *codebook_ == *o.codebook_)) &&
           ggml_type_ == o.ggml_type_;
  }

 private:
  static DataType parse_grammar(std::string_view text);
  void validate(std::string_view text) const;
  Family family_{};  // the TensorCast grammar
  uint32_t ggml_type_ = 0;
  NumberSpec number_;
  std::optional<ScaleSpec> scale_;
  std::shared_ptr<const Codebook> codebook_;
  std::string name_;
};

// Registry group of ggml's block formats (the ggml family; spec = name).
inline constexpr const char* kGgmlGroup = "ggml (llama.cpp)";

struct RegistryEntry {
  std::string name;
  std::string spec;   // canonical datatype string
  std::string group;  // "MX (OCP)", "NVIDIA", "unscaled", "tensor-scaled int", ...
  std::string description;
};

// All predefined datatypes, in display order.
const std::vector<RegistryEntry>& registry();
const RegistryEntry* find_registry(std::string_view name);

}  // namespace castscope
