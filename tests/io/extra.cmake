# The io tests write .npz archives with libzip and ONNX models with protobuf when the engine
# reads them.
if(LIBZIP_FOUND)
  target_link_libraries(${_t} PRIVATE PkgConfig::LIBZIP)
  target_compile_definitions(${_t} PRIVATE CASTSCOPE_TEST_LIBZIP=1)
endif()
target_compile_definitions(${_t} PRIVATE ONNX_ML=1 ONNX_NAMESPACE=onnx)
