# The CLI side of the model map and rotations (tests/modelmap/cli_map.sh).
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_cli_map
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/modelmap/cli_map.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli_map)
set_tests_properties(castscope_cli_map PROPERTIES LABELS modelmap TIMEOUT 120)
