# The include layering of the sources (tools/check_layering.py): at most 5 includes against it,
# no include cycles.
add_test(NAME castscope_layering COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/check_layering.py)
set_tests_properties(castscope_layering PROPERTIES LABELS engine TIMEOUT 60)
