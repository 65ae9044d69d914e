// Block Hadamard rotations: an orthogonal transform applied along the cast axis before casting
// and inverted after, so that outliers spread over a block before quantization (QuaRot, the NVFP4
// recipe of TransformerEngine). The transform is R = H_n D / sqrt(n) on each block of n values,
// with D a diagonal of random signs (or the identity); R^-1 = D H_n / sqrt(n).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace castscope {

struct Rotation {
  int size = 0;               // block size n: 0 (none) or a power of two in [16, 256]
  bool random_signs = false;  // D from `seed`; otherwise D = I
  uint64_t seed = 0;
  bool enabled() const { return size > 0; }
  // "none", "h128" or "h128r7" (random signs from seed 7); parse_rotation reads them back.
  std::string str() const;
  bool operator==(const Rotation& o) const {
    return size == o.size && random_signs == o.random_signs && (!random_signs || seed == o.seed);
  }
};

// "none" | "" | "hN" | "hNrSEED" | "N". Throws Error naming the text for anything else.
Rotation parse_rotation(std::string_view text);
// Throws Error (naming `what`) unless size is 0 or a power of two in [16, 256].
void validate_rotation(const Rotation& r, const std::string& what = "rotation");

}  // namespace castscope
