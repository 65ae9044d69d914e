# The Python interop check of the exported layouts (tests/interop/test_interop.py): numpy and
# safetensors from pip; exit code 77 (skip) when they are not installed.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_castscope_python ${Python3_EXECUTABLE})
else()
  set(_castscope_python python3)
endif()
add_dependencies(${_t} castscope-cli)
# One interop script of tests/interop run on the CLI (and any further arguments); exit code 77
# is a skip (its Python packages are not installed).
function(castscope_interop_test name script timeout labels)
  add_test(NAME ${name}
    COMMAND ${_castscope_python} ${PROJECT_SOURCE_DIR}/tests/interop/${script} $<TARGET_FILE:castscope-cli> ${ARGN})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout} LABELS "${labels}")
endfunction()
castscope_interop_test(castscope_interop_python test_interop.py 300 "export;interop")
# Model directories through the real client libraries (tests/interop/test_models.py): a tiny
# transformers model in, compressed-tensors' and transformers' own decoders on what comes out.
castscope_interop_test(castscope_models_python test_models.py 600 "export;interop")
# GGUF -> GGUF through ggml's own Python package (tests/interop/test_gguf_interop.py); exit code
# 77 (skip) when gguf is not installed.
castscope_interop_test(castscope_interop_gguf test_gguf_interop.py 300 "export;interop")
# The gpt-oss layout loaded by transformers itself (tests/interop/test_gptoss.py): a tiny GptOss
# in, transformers' MXFP4 loader on what comes out; exit code 77 (skip) without torch /
# transformers.
castscope_interop_test(castscope_gptoss_python test_gptoss.py 600 "export;interop")
# CastScope's GGUF exports in llama.cpp itself (tests/interop/test_llama_cpp.py): a tiny
# transformers Llama as F16 GGUF, quantized by CastScope and by llama_model_quantize, both run in
# llama.cpp through llama-cpp-python (scripts/setup-llama-cpp.sh); exit code 77 (skip) without it.
castscope_interop_test(castscope_llama_cpp_python test_llama_cpp.py 600 "export;interop")
# Quantization layouts from the files (tests/interop/test_layouts.py): ONNX graphs built with the
# onnx package, tiny GPT-2 / Llama from transformers, a Keras-layout file and PaddleOCR v4's
# recognizer (from the models cache scripts/setup.sh fills); map figures equal
# the casts of the documented 2-D views. Exit code 77 (skip) without onnx / safetensors.
# With the app built, its scripted model map is checked against the CLI's too.
set(_castscope_layout_app "")
if(CASTSCOPE_GUI)
  set(_castscope_layout_app $<TARGET_FILE:castscope>)
endif()
castscope_interop_test(castscope_layouts_python test_layouts.py 600 "export;interop;layout" ${_castscope_layout_app})
# Plans and exports with methods (tests/interop/test_method_export.py): datatype x method
# candidates in the budget planner, GPTQ exports decoded by compressed-tensors' own decompressors
# against CastScope's method cast; exit code 77 (skip) without torch / compressed-tensors.
castscope_interop_test(castscope_method_export_python test_method_export.py 600 "export;interop;methods")
# ggml's quantizers with importance weights (tests/interop/test_ggml_imatrix.py): libggml-base of
# llama-cpp-python's build against `castscope-cli cast --imatrix`, block for block; exit code 77
# (skip) without llama_cpp.
castscope_interop_test(castscope_ggml_imatrix_python test_ggml_imatrix.py 600 "export;interop")
# CastScope's GGUF export with llama-imatrix's importance matrix against llama-quantize --imatrix
# (tests/interop/test_imatrix_llama.py), both tools built once by scripts/setup-llama-tools.sh;
# exit code 77 (skip, the reason printed) when they cannot be built.
castscope_interop_test(castscope_imatrix_llama_python test_imatrix_llama.py 1800 "export;interop")
# vLLM's fused projections (tests/interop/test_fused.py): a tiny Llama exported as NVFP4, q / k / v
# and gate / up sharing one global scale, decompressed and re-quantized by compressed-tensors;
# exit code 77 (skip) without torch / compressed-tensors.
castscope_interop_test(castscope_fused_python test_fused.py 600 "export;interop")
