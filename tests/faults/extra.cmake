# castscope-cli's exit codes on usage errors and bad input (tests/faults/cli_exit_codes.sh).
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_cli_exit_codes
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/faults/cli_exit_codes.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR})
set_tests_properties(castscope_cli_exit_codes PROPERTIES LABELS "faults;cli" TIMEOUT 60)
