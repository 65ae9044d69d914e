#include "families/family_table.hpp"

#include <iterator>

#include "castscope/error.hpp"
#include "castscope/storage_bits.hpp"
#include "castscope/tcfp.hpp"
#include "families/codebook/cb_cast.hpp"
#include "backends/cpu/cast_cpu.hpp"
#include "families/ggml/ggml_cast.hpp"

namespace castscope::detail {
namespace {

// ggml's blocks are their own packed layout: actual and compressed results hold the same bytes.
CastResult ggml_pack(const CastResult& a) {
  CastResult r = a;
  r.mode = CastMode::Compress;
  return r;
}
CastResult ggml_unpack(const CastResult& c) {
  CastResult r = c;
  r.mode = CastMode::Actual;
  return r;
}

// TCFP's block is that of e4m3fn_e8m0_t32: one e8m0 code per 32 values for each term.
template <Family F>
std::string tcfp_str(const DataType&) {
  return F == Family::TCFP8 ? "tcfp8" : F == Family::TCFP12 ? "tcfp12" : "tcfp16";
}
template <Family F>
double tcfp_bits_per_value(const DataType&, int64_t channel_length) {
  const double scales = 8.0 * tiles_per_value(channel_length, 32);
  return F == Family::TCFP8    ? 8 + scales
         : F == Family::TCFP12 ? 8 + 4 + 2 * scales
                               : 16 + 2 * scales;
}
template <Family F>
std::string tcfp_describe(const DataType&) {
  return F == Family::TCFP8 ? "TCFP-8: e4m3fn values, e8m0 scale per block of 32 chosen at 3 sigma "
                              "(NormalFloat-aware)"
         : F == Family::TCFP12
             ? "TCFP-12: e4m3fn main value + 4-bit signed residual in [-7, 7], each with an e8m0 "
               "scale per block of 32"
             : "TCFP-16: two e4m3fn terms (high + low residual), each with an e8m0 scale per "
               "block of 32";
}

// TCFP: the main terms' bits per value and per block of 32 one e8m0 scale per term.
template <Family F>
uint64_t tcfp_storage_bits(const DataType&, uint64_t values, uint64_t rows, int64_t len,
                           const Shape&, const CastOptions&) {
  const uint64_t blocks = rows * static_cast<uint64_t>((len + 31) / 32);
  return F == Family::TCFP8    ? values * 8 + blocks * 8
         : F == Family::TCFP12 ? values * 12 + blocks * 16
                               : values * 16 + blocks * 16;
}

template <Family F>
constexpr FamilyOps tcfp_row() {
  return {{F,
           F == Family::TCFP8    ? "tcfp8"
           : F == Family::TCFP12 ? "tcfp12"
                                 : "tcfp16",
           "TCFP", false, true, false, true, true,
           "TCFP block scales are internal to the TCFP kernels; no tile map", "e4m3fn", false,
           F == Family::TCFP8    ? 8
           : F == Family::TCFP12 ? 12
                                 : 16,
           F == Family::TCFP12 ? 4 : 0, false},
          tcfp_str<F>,
          tcfp_bits_per_value<F>,
          tcfp_describe<F>,
          tcfp::cast,
          tcfp::upcast,
          tcfp::pack,
          tcfp::unpack,
          tcfp_storage_bits<F>,
          nullptr,
          nullptr};
}

// In Family order; family_ops checks that a row sits at its family's index.
const FamilyOps kTable[] = {
    {{Family::Standard, "standard", "TensorCast", true, false, true, true, true, nullptr, nullptr,
      true, 0, 0, false},
     standard_str,
     standard_bits_per_value,
     standard_describe,
     cpu::cast_standard,
     cpu::upcast_standard,
     pack_standard,
     unpack_standard,
     standard_storage_bits,
     nullptr,
     standard_scaled_quantizer},
    tcfp_row<Family::TCFP8>(),
    tcfp_row<Family::TCFP12>(),
    tcfp_row<Family::TCFP16>(),
    // A codebook's mapping choice and ggml's reference quantizer run on the host; the CUDA
    // backend casts codebooks but the views' per-tile mappings come from the host cast.
    {{Family::Codebook, "codebook", "codebook", true, true, true, true, false, nullptr, nullptr,
      false, 0, 0, false},
     codebook_str,
     codebook_bits_per_value,
     codebook_describe,
     codebook::cast,
     codebook::upcast,
     codebook::pack,
     codebook::unpack,
     codebook_storage_bits,
     nullptr,
     nullptr},
    {{Family::GGML, "ggml", "ggml block", false, true, false, false, false,
      "ggml block scales live inside the GGUF blocks; no tile map", nullptr, false, 0, 0, true},
     ggml_str,
     ggml_bits_per_value,
     ggml_describe,
     ggml::cast,
     ggml::upcast,
     ggml_pack,
     ggml_unpack,
     ggml_storage_bits,
     // No virtual cast across rows: ggml runs blocks along rows only, so a cast along another
     // axis is refused by name (ggml::cast) rather than computed where no runtime holds it.
     nullptr},
};

}  // namespace

const FamilyOps& family_ops(Family f) {
  const size_t i = static_cast<size_t>(f);
  if (i >= std::size(kTable) || kTable[i].traits.family != f)
    throw Error("internal: family " + std::to_string(i) + " has no row in the family table");
  return kTable[i];
}

const FamilyOps* family_table(size_t* count) {
  *count = std::size(kTable);
  return kTable;
}

}  // namespace castscope::detail

namespace castscope {

const FamilyTraits& family_traits(Family f) {
  return detail::family_ops(f).traits;
}

// DataType's text and size facts are its row's.
std::string DataType::str() const {
  return detail::family_ops(family_).str(*this);
}

// On rows of a known length the figure is storage_bits' (partial tiles and ggml blocks whole)
// per value of a row: what one more row costs, so what a tensor stores once (a tensor scale) is
// left out. Without a length it is the family's nominal figure.
double DataType::bits_per_value(int64_t channel_length) const {
  if (channel_length <= 0) return detail::family_ops(family_).bits_per_value(*this, 0);
  // A 2-D tile spans rows as well: one tile's height of rows holds whole tiles.
  int64_t rows = 1;
  if (scale_ && scale_->tiles.size() > 1 && scale_->tiles.front().size > 0)
    rows = scale_->tiles.front().size;
  CastOptions o;
  o.axis = -1;
  try {
    const uint64_t one = storage_bits(*this, {rows, channel_length}, o);
    const uint64_t two = storage_bits(*this, {2 * rows, channel_length}, o);
    return static_cast<double>(two - one) / static_cast<double>(rows * channel_length);
  } catch (const Error&) {
    // a layout this row cannot take (the cast says why): the family's own figure
    return detail::family_ops(family_).bits_per_value(*this, channel_length);
  }
}

std::string DataType::describe() const {
  return detail::family_ops(family_).describe(*this);
}

}  // namespace castscope
