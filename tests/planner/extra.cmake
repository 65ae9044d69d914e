# The CLI side of the budget planner (tests/planner/cli_plan.sh).
add_dependencies(${_t} castscope-cli)
add_test(NAME castscope_cli_plan
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/planner/cli_plan.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli_plan)
set_tests_properties(castscope_cli_plan PROPERTIES LABELS planner TIMEOUT 120)
# plan --layout on PaddleOCR v4's recognizer (tests/planner/cli_plan_layout.sh); a skip (77)
# without the model scripts/setup.sh fetches.
add_test(NAME castscope_cli_plan_layout
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/planner/cli_plan_layout.sh $<TARGET_FILE:castscope-cli>
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli_plan_layout)
set_tests_properties(castscope_cli_plan_layout PROPERTIES LABELS planner TIMEOUT 600
  SKIP_RETURN_CODE 77)
