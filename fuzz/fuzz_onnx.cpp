// Fuzzes the .onnx reader: open, list and load every tensor of arbitrary bytes.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  castscope::fuzz::open_list_load(data, size, ".onnx");
  return 0;
}
