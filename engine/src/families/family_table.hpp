// The family table: one row per datatype family (TensorCast-grammar formats, TCFP-8 / 12 / 16,
// codebooks, ggml blocks), after ggml's type_traits. Every place that would switch on the family
// reads its row instead; adding a family is one row plus its kernels, and
// tests/engine/test_family_table.cpp checks that every row provides what a row must.
#pragma once

#include <cstdint>
#include <string>

#include "castscope/cast.hpp"
#include "castscope/datatype.hpp"

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
CastResult pack_standard(const CastResult& actual);
CastResult unpack_standard(const CastResult& packed);

}  // namespace castscope::detail
