# CastScope's GPTQ against llm-compressor's own quantize_weight (tests/interop/test_gptq_peer.py),
# run with the Python of the llm-compressor virtual environment scripts/setup.sh --dev makes
# (llm-compressor pins torch / transformers / compressed-tensors versions of its own); exit code
# 77 (skip) when that environment is missing.
add_dependencies(${_t} castscope-cli)
set(_castscope_llmc_python $ENV{HOME}/.cache/castscope/venv-llmcompressor/bin/python)
if(NOT EXISTS ${_castscope_llmc_python})
  set(_castscope_llmc_python python3)
endif()
add_test(NAME castscope_gptq_peer_python
  COMMAND ${_castscope_llmc_python} ${PROJECT_SOURCE_DIR}/tests/interop/test_gptq_peer.py
          $<TARGET_FILE:castscope-cli>)
set_tests_properties(castscope_gptq_peer_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  LABELS "methods;interop")
