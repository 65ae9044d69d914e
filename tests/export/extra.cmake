# The Python interop check of the exported layouts (tests/interop/test_interop.py): numpy and
# safetensors from pip; exit code 77 (skip) when they are not installed.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_castscope_python ${Python3_EXECUTABLE})
else()
  set(_castscope_python python3)
endif()
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_interop_python
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_interop.py $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_interop_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "export;interop")
# Model directories through the real client libraries (tests/interop/test_models.py): a tiny
# transformers model in, compressed-tensors' and transformers' own decoders on what comes out.
add_test(NAME castscope_models_python
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_models.py $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_models_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "export;interop")
# GGUF -> GGUF through ggml's own Python package (tests/interop/test_gguf_interop.py); exit code
# 77 (skip) when gguf is not installed.
add_test(NAME castscope_interop_gguf
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_gguf_interop.py $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_interop_gguf PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "export;interop")
# The gpt-oss layout loaded by transformers itself (tests/interop/test_gptoss.py): a tiny GptOss
# in, transformers' MXFP4 loader on what comes out; exit code 77 (skip) without torch /
# transformers.
add_test(NAME castscope_gptoss_python
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_gptoss.py $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_gptoss_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "export;interop")
# CastScope's GGUF exports in llama.cpp itself (tests/interop/test_llama_cpp.py): a tiny
# transformers Llama as F16 GGUF, quantized by CastScope and by llama_model_quantize, both run in
# llama.cpp through llama-cpp-python (scripts/setup-llama-cpp.sh); exit code 77 (skip) without it.
add_test(NAME castscope_llama_cpp_python
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_llama_cpp.py $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_llama_cpp_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "export;interop")
# Quantization layouts from the files (tests/interop/test_layouts.py): ONNX graphs built with the
# onnx package, tiny GPT-2 / Llama from transformers, a Keras-layout file and PaddleOCR v4's
# recognizer (from the models cache scripts/setup.sh fills); map figures equal
# the casts of the documented 2-D views. Exit code 77 (skip) without onnx / safetensors.
# With the app built, its scripted model map is checked against the CLI's too.
set(_castscope_layout_app "")
if(CASTSCOPE_GUI)
  set(_castscope_layout_app $<TARGET_FILE:castscope>)
endif()
add_test(NAME castscope_layouts_python
  COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_layouts.py $<TARGET_FILE:castscope-cli> ${_castscope_layout_app})
set_tests_properties(castscope_layouts_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "export;interop;layout")
