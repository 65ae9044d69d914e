// The dense layout of packed files (castscope.version 4): every part of a compressed cast whose
// values are narrower than their storage (FP6 codes in bytes, 3-bit codes in nibbles, a row's
// padding fields) is stored as one bit stream of exactly its width (docs/export-formats.md,
// "Packing"). In memory, compressed results keep the layout of pack() (docs/formats.md).
#pragma once

#include <cstdint>
#include <vector>

#include "castscope/cast.hpp"

namespace castscope::io::detail {

// How one part holds its values in memory, and how many bits each takes in a dense file.
struct DenseField {
  Tensor CastResult::*member = nullptr;
  int field = 0;      // bits a value takes in memory: 1, 2 or 4 (fields packed into bytes along
                      // the last axis, a row's last byte padded) or 8 · the element size
  int64_t len = 0;    // values per row (field < 8); the whole tensor otherwise
  int bits = 0;       // bits a value takes in a dense file
  bool sign = false;  // two's complement, sign-extended to the field in memory
};

// The parts of compressed result r that the dense layout stores differently from memory (every
// other part is written as it is). Throws Error where r's datatype does not apply to its shape.
std::vector<DenseField> dense_fields(const CastResult& r);
// Whether the dense layout stores such a part differently from memory (narrower values, or rows
// that end inside a byte); a file holding one is version 4.
bool dense_differs(const DenseField& f);
// Bytes of part t of r in the dense layout.
uint64_t dense_nbytes(const DenseField& f, const Tensor& t);
// Part t as a dense bit stream (U8, shape [bytes]): value k at bits k·bits ... k·bits + bits - 1,
// least significant bit first.
Tensor to_dense(const DenseField& f, const Tensor& t);
// The in-memory part of dtype `dtype` and shape `shape` from a dense stream of `nbytes` bytes.
Tensor from_dense(const DenseField& f, const uint8_t* data, uint64_t nbytes, DType dtype,
                  const Shape& shape);

}  // namespace castscope::io::detail
