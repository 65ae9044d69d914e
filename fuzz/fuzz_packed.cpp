// Fuzzes the CastScope packed-file loader and the upcast of what it returns.
#include "castscope/cast.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = castscope::fuzz::scratch_path(".packed.safetensors");
  castscope::fuzz::write_input(path, data, size);
  try {
    for (const castscope::io::PackedTensor& p : castscope::io::load_packed(path)) {
      try {
        const castscope::Tensor v = castscope::upcast(p.result);
        if (v.numel() != castscope::numel(p.result.shape)) std::abort();
      } catch (const castscope::Error&) {
      }
    }
  } catch (const castscope::Error&) {
  }
  return 0;
}
