// llama.cpp's importance matrices (`llama-imatrix`): the GGUF files it writes by default and its
// legacy .dat files, read and written, and the per-column weights `llama-quantize --imatrix`
// derives from them for each tensor (the `quant_weights` of ggml's quantizers, given to a cast
// through CastOptions::importance).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "castscope/tensor.hpp"

namespace castscope::io {

struct ImatrixEntry {
  // GGUF: the summed squared activations, `counts.size()` sets (experts) of equal length, and the
  // rows counted per set. Legacy: the values as stored (mean * ncall) and one count, ncall.
  std::vector<float> sums;
  std::vector<int64_t> counts;
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by the weight tensor's GGUF name
  std::vector<std::string> datasets;
  int32_t chunk_count = 0, chunk_size = 0;
  bool legacy = false;        // read from (or to be written as) a .dat file
  bool has_metadata = false;  // GGUF: datasets, chunk count and size all present

  // The weights llama-quantize uses for an entry: per set sums / count (a set never seen weighs
  // 1 throughout), legacy sums / ncall; empty without an entry of that name.
  std::vector<float> weights(const std::string& name) const;
  // The weights for tensor `name` of `shape` (slowest axis first), checked as llama-quantize
  // checks them: as many as the row length times the experts (ggml's ne[0] * ne[2]). Null when
  // there is no entry, or for a token embedding whose size differs (llama-quantize quantizes it
  // without); any other size mismatch throws Error naming the tensor.
  std::shared_ptr<const std::vector<float>> weights_for(const std::string& name,
                                                        const Shape& shape) const;
};

// Reads a GGUF imatrix, or else a legacy .dat one (as llama.cpp decides). Throws Error naming
// the file and entry for a malformed or truncated file or a non-finite or negative value.
Imatrix read_imatrix(const std::string& path);
// Writes `m` as llama-imatrix writes it (staged and renamed): GGUF (general.type "imatrix",
// imatrix.datasets / chunk_count / chunk_size, NAME.in_sum2 and NAME.counts per entry in name
// order), or the legacy layout. A legacy matrix written as GGUF keeps its weights (sums with
// count ncall); a GGUF one written as legacy needs its chunk size, as llama-imatrix's does.
void write_imatrix(const std::string& path, const Imatrix& m, bool legacy);

}  // namespace castscope::io
