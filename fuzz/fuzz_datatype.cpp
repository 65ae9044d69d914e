// Fuzzes the datatype-string parser: any string either parses or gives castscope::Error, and a
// parsed datatype prints to a string that parses back to the same datatype.
#include <cstdlib>
#include <string>

#include "castscope/datatype.hpp"
#include "castscope/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;
  const std::string s(reinterpret_cast<const char*>(data), size);
  castscope::DataType d;
  try {
    d = castscope::DataType::parse(s);
  } catch (const castscope::Error&) {
    return 0;
  }
  const std::string text = d.str();
  try {
    if (!(castscope::DataType::parse(text) == d)) std::abort();  // parse(str()) must round-trip
  } catch (const castscope::Error&) {
    std::abort();  // a printed datatype must parse
  }
  (void)d.label();
  (void)d.describe();
  (void)d.bits_per_value(64);
  return 0;
}
