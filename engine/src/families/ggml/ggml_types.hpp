// ggml's tensor types as GGUF stores them: one table of ids, names and block geometry, shared by
// the GGUF reader and exporter, and the decoders of every block format that ggml's Python
// package (gguf-py, gguf.quants) can dequantize. The decoders follow gguf-py's float32
// arithmetic operation for operation, so they give its values bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "castscope/tensor.hpp"

namespace castscope::ggml {

struct TypeInfo {
  uint32_t id;
  const char* name;
  uint32_t block;        // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool decodes;          // CastScope converts it to float32
};

// The entry of a ggml type id, or null for an id this table does not know.
const TypeInfo* type_info(uint32_t id);
const TypeInfo* type_by_name(const std::string& name);
// The plain DType of F32, F16, BF16, F64 and the integer types; nullopt for block formats.
std::optional<DType> plain_dtype(uint32_t id);
// Bytes of `n` elements (n a multiple of the block).
uint64_t row_bytes(const TypeInfo& t, uint64_t n);

// NVFP4's UE4M3 block scale as ggml decodes it (ggml_ue4m3_to_fp32): halved, for the doubled
// E2M1 table; 0 and 0x7F give 0.
float ue4m3_half(uint8_t x);

// Decodes `n` elements (a multiple of the block) of a type with `decodes` set into float32.
void dequantize(uint32_t id, const uint8_t* src, uint64_t n, float* out);

}  // namespace castscope::ggml

namespace castscope::ggml {

// Types with a quantizer here: the quantizers llama.cpp's model quantizer runs (ggml_quantize_chunk
// in ggml.c), bit for bit; without an importance matrix: ggml's reference quantizers
// (quantize_row_*_ref in ggml-quants.c, which gguf-py's gguf.quants.quantize implements) for all
// but IQ4_NL, whose model quantizer (quantize_iq4_nl) searches more scales than its _ref.
bool can_quantize(uint32_t id);
// Quantizes `n` float32 values (a multiple of the block) into blocks. A block holding a NaN or
// infinity, which ggml leaves undefined, gets NaN scales (and zero points) and zero codes, so it
// decodes to NaN throughout.
//
// `qw`, optional: llama.cpp's importance weights (`quant_weights`, an importance matrix entry),
// one per element of x. `x` is then one row of n values, as ggml_quantize_chunk passes a row and
// the row's per-column weights to quantize_<type>; the types of takes_importance() follow
// quantize_row_<type>_impl with them, bit for bit, the others ignore them as ggml does (Q8_0,
// MXFP4, TQ1_0, TQ2_0). Without weights the bytes are those of the unweighted quantizers.
void quantize(uint32_t id, const float* x, uint64_t n, uint8_t* out, const float* qw = nullptr);
// Whether quantize() uses importance weights for this type.
bool takes_importance(uint32_t id);

}  // namespace castscope::ggml
