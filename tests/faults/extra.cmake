# castscope-cli's exit codes on usage errors and bad input (tests/faults/cli_exit_codes.sh).
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_cli_exit_codes
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/faults/cli_exit_codes.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR})
set_tests_properties(castscope_cli_exit_codes PROPERTIES LABELS "faults;cli" TIMEOUT 60)
# Commands that write name the user's path when they cannot (tests/faults/cli_write_errors.sh).
add_test(NAME castscope_cli_write_errors
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/faults/cli_write_errors.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR})
set_tests_properties(castscope_cli_write_errors PROPERTIES LABELS "faults;cli" TIMEOUT 120)
# Messages on bad files and a missing Python package (tests/faults/cli_messages.sh); a skip (77)
# without python3's onnx package.
add_test(NAME castscope_cli_messages
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/faults/cli_messages.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR})
set_tests_properties(castscope_cli_messages PROPERTIES LABELS "faults;cli" TIMEOUT 60
  SKIP_RETURN_CODE 77)
