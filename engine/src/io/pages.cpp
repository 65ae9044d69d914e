#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "castscope/io.hpp"

namespace castscope::io {

// Readers memory-map whole files; the pages of a tensor already exported would stay resident
// (and count in our RSS) until the model is closed. Dropping them is only a hint: the mapping
// stays valid and re-reads the file if touched again.
void release_pages(const Model& model, const std::string& name) {
  const std::string f = model.format();
  if (f != "safetensors" && f != "gguf") return;  // their load_raw is a view of the map
  try {
    const Tensor raw = model.load_raw(name);
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page <= 0 || raw.nbytes() < static_cast<size_t>(page)) return;
    const uintptr_t b = reinterpret_cast<uintptr_t>(raw.data());
    const uintptr_t lo = (b + page - 1) / page * page, hi = (b + raw.nbytes()) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  } catch (const Error&) {
  }
}

}  // namespace castscope::io
