// Codebook number specs (TensorCast docs/codebook.md): each tile or subtile picks one of 2^M
// mappings (lookup tables of 2^I compute values) and stores 2^I-entry indices. Implicit codebooks
// (icb<I><M><clauses>_<compute>) are generated from pattern clauses; generic ones
// (cb<I><M>_<compute>[_<label>]) take their tables from a JSON file (docs/formats.md).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "castscope/format.hpp"

namespace castscope {

struct Codebook {
  int index_bits = 0;  // I: bits of each stored index
  int meta_bits = 0;   // M: bits of the per-tile / per-subtile mapping choice
  bool implicit = false;
  std::string clauses;  // implicit pattern clauses ("fi", "p1s2"); empty for generic codebooks
  std::string label;    // optional name, part of the canonical string
  NumberSpec compute;   // unscaled format the mapped values belong to
  // 2^M mappings of 2^I values each, ascending and mirror-symmetric around the centre pair
  // (-0, +0): entry H-1-j is the negative of entry H+j, H = 2^(I-1).
  std::vector<std::vector<double>> maps;
  std::vector<std::string> names;  // one per mapping ("f_0", "i_3", ...)

  int num_maps() const { return 1 << meta_bits; }
  int num_values() const { return 1 << index_bits; }
  // "icb44fi_e4m3fn", "cb42_e4m3fn_mybook": the number-spec part of a datatype string.
  std::string str() const;
  bool operator==(const Codebook& o) const;
};

// True when a datatype string's first segment starts a codebook ("cb..." or "icb...").
bool is_codebook_head(std::string_view segment);
// Builds the codebook from its head segment ("icb44fi"), compute spec segment and optional label.
// Generic codebooks take the tables registered for that string (load_codebook_file). Throws Error
// naming the segment that is wrong.
std::shared_ptr<const Codebook> make_codebook(std::string_view head, std::string_view compute,
                                              std::string_view label);
// True when `segment` may be a codebook label: letters and digits, starting with a letter, and not
// a number format or tile.
bool is_codebook_label(std::string_view segment);

// Reads a codebook table file (JSON: {"codebook": "cb42_e4m3fn_name", "mappings": [[...], ...],
// "names": [...]}) and registers its tables for the process, so that datatype strings naming it
// parse. Returns the codebook. Throws Error naming the file and the field that is wrong.
std::shared_ptr<const Codebook> load_codebook_file(const std::string& path);
// Registers tables given in memory (same checks as the file reader; `where` names the source in
// errors).
std::shared_ptr<const Codebook> register_codebook(const std::string& spec,
                                                  const std::vector<std::vector<double>>& maps,
                                                  const std::vector<std::string>& names,
                                                  const std::string& where);

}  // namespace castscope
