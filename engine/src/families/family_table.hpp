// The family table: one row per datatype family (TensorCast-grammar formats, TCFP-8 / 12 / 16,
// codebooks, ggml blocks), after ggml's type_traits. Every place that would switch on the family
// reads its row instead; adding a family is one row plus its kernels, and
// tests/engine/test_family_table.cpp checks that every row provides what a row must.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "castscope/cast.hpp"
#include "castscope/datatype.hpp"
#include "families/scaled_quantizer.hpp"

namespace castscope::detail {

struct FamilyOps {
  FamilyTraits traits;
  // Text and size facts (DataType::str, bits_per_value, describe).
  std::string (*str)(const DataType&);
  double (*bits_per_value)(const DataType&, int64_t channel_length);
  std::string (*describe)(const DataType&);
  // The CPU backend on one actual-mode cast (dispatch, flattening and rotation happen before).
  CastResult (*cast)(const Tensor& x, const DataType& d, const CastOptions& o);
  Tensor (*upcast)(const CastResult& actual);
  CastResult (*pack)(const CastResult& actual);
  CastResult (*unpack)(const CastResult& packed);
  // The exact storage of a cast (storage_bits() in planner.hpp) on the resolved options: `values`
  // elements in `rows` of `len` along the quantization axis.
  uint64_t (*storage_bits)(const DataType& d, uint64_t values, uint64_t rows, int64_t len,
                           const Shape& shape, const CastOptions& resolved);
  // A virtual cast the family runs its own way before the common path, or nullopt to take the
  // common path; null for none (ggml: a cast across rows, see ggml_cast.hpp).
  std::optional<CastResult> (*virtual_cast)(const Tensor& x, const DataType& d,
                                            const CastOptions& o);
  // The quantizer the methods layer drives (choose a group's scale, cast with given scales) for
  // a weight viewed as [rows, cols] under options with the axis last; null where the family has
  // none yet (the methods then refuse the datatype by name).
  std::unique_ptr<ScaledQuantizer> (*scaled_quantizer)(const DataType& d, const CastOptions& o,
                                                       int64_t rows, int64_t cols);
};

const FamilyOps& family_ops(Family f);
// Every row, in Family order (for tests and listings).
const FamilyOps* family_table(size_t* count);

// Tiles of T per value along an axis of L (ceil(L / T) / L: a partial last tile carries a whole
// tile's scales); 1 / T when L is unknown (0), one per row when T is 0 (a channel).
double tiles_per_value(int64_t L, int64_t T);

// Row functions of the TensorCast-grammar family that live with the format and packing code.
std::string standard_str(const DataType& d);
double standard_bits_per_value(const DataType& d, int64_t channel_length);
std::string standard_describe(const DataType& d);
std::string codebook_str(const DataType& d);
double codebook_bits_per_value(const DataType& d, int64_t channel_length);
std::string codebook_describe(const DataType& d);
std::string ggml_str(const DataType& d);
double ggml_bits_per_value(const DataType& d, int64_t channel_length);
std::string ggml_describe(const DataType& d);
uint64_t standard_storage_bits(const DataType& d, uint64_t values, uint64_t rows, int64_t len,
                               const Shape& shape, const CastOptions& resolved);
uint64_t codebook_storage_bits(const DataType& d, uint64_t values, uint64_t rows, int64_t len,
                               const Shape& shape, const CastOptions& resolved);
uint64_t ggml_storage_bits(const DataType& d, uint64_t values, uint64_t rows, int64_t len,
                           const Shape& shape, const CastOptions& resolved);
CastResult pack_standard(const CastResult& actual);
CastResult unpack_standard(const CastResult& packed);

}  // namespace castscope::detail
