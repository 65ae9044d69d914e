# The io tests write .npz archives with libzip and ONNX models with protobuf when the engine
# reads them.
if(LIBZIP_FOUND)
  target_link_libraries(${_t} PRIVATE PkgConfig::LIBZIP)
  target_compile_definitions(${_t} PRIVATE CASTSCOPE_TEST_LIBZIP=1)
endif()
target_compile_definitions(${_t} PRIVATE ONNX_ML=1 ONNX_NAMESPACE=onnx)
# Quantized checkpoints written by the producers' own code (tests/interop/
# test_quantized_sources.py): compressed-tensors' compressors on a tiny transformers Llama,
# transformers' fine-grained FP8 and gpt-oss MXFP4 dequantization as the references; exit code 77
# (skip) without torch / transformers / compressed-tensors.
find_package(Python3 COMPONENTS Interpreter)
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_quantized_sources_python
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/interop/test_quantized_sources.py
          $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_quantized_sources_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  LABELS "io;interop")
