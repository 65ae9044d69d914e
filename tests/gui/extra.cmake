# The GUI area: the widget library for the view tests, then CTest entries that run the real
# program: --headless, and scripted sessions under xvfb checked by castscope_gui_check.
target_link_libraries(${_t} PRIVATE castscope_widgets)
# App code without a window that the unit tests check directly.
target_sources(${_t} PRIVATE ${PROJECT_SOURCE_DIR}/app/gui/map_groups.cpp)
target_include_directories(${_t} PRIVATE ${PROJECT_SOURCE_DIR}/app/gui)

add_executable(castscope_gui_check ${CMAKE_CURRENT_SOURCE_DIR}/gui/check/check_session.cpp)
target_link_libraries(castscope_gui_check PRIVATE nlohmann_json::nlohmann_json stb)
target_include_directories(castscope_gui_check PRIVATE ${PROJECT_SOURCE_DIR}/engine/include)

add_test(NAME gui.headless COMMAND castscope --headless)
add_test(NAME gui.headless_file COMMAND castscope --headless ${PROJECT_SOURCE_DIR}/assets/demo_outliers.npy --dtype nvfp4)
add_test(NAME gui.headless_bad_dtype COMMAND castscope --headless --dtype e9m9_nonsense)
set_tests_properties(gui.headless_bad_dtype PROPERTIES WILL_FAIL TRUE)
set_tests_properties(gui.headless gui.headless_file gui.headless_bad_dtype PROPERTIES LABELS gui ENVIRONMENT "DISPLAY=")

find_program(CASTSCOPE_XVFB_RUN xvfb-run)
if(CASTSCOPE_XVFB_RUN)
  # A file that claims to be .npy but is not: the app must report it and keep going.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/errors/hostile.npy "NUMPY? no: a truncated, hostile file\n")
  file(COPY ${PROJECT_SOURCE_DIR}/assets/demo_outliers.npy DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/npy)
  file(COPY ${PROJECT_SOURCE_DIR}/assets/demo_outliers.npy DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/mouse_files/data)
  file(COPY ${PROJECT_SOURCE_DIR}/assets/demo_outliers.npy ${PROJECT_SOURCE_DIR}/assets/demo_layer.npy
       DESTINATION ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/files_relative/data)
  file(GLOB _gui_sessions ${CMAKE_CURRENT_SOURCE_DIR}/gui/scripts/*.txt)
  foreach(_script ${_gui_sessions})
    get_filename_component(_session ${_script} NAME_WE)
    add_test(NAME gui.session.${_session}
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gui/run_session.sh $<TARGET_FILE:castscope>
        $<TARGET_FILE:castscope_gui_check> ${_script} ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/${_session})
    set_tests_properties(gui.session.${_session} PROPERTIES LABELS gui TIMEOUT 300 RUN_SERIAL TRUE
      SKIP_RETURN_CODE 77)
  endforeach()
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_FOUND)
    # onnx_views: the mask and the teaching view of an ONNX graph's Conv and MatMul [K, N]
    # weights, on each tensor's view [outputs, reduction], operated by the mouse (the model built
    # with onnx). cost_bits: every panel's bits per value is the tensor's storage (storage_bits)
    # on short rows, and a datatype that cannot run along a tensor's axis is refused by name.
    # teach_grid: the teaching view of two-level scales (NVFP4, float32 tensor scales), plotted
    # codes on the grid, clipped marks equal to the tile map's count and the cast's.
    foreach(_py onnx_views cost_bits teach_grid)
      add_test(NAME gui.${_py}
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gui/${_py}.py
          $<TARGET_FILE:castscope> $<TARGET_FILE:castscope_gui_check>
          ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/${_py})
      set_tests_properties(gui.${_py} PROPERTIES LABELS gui TIMEOUT 300 RUN_SERIAL TRUE
        SKIP_RETURN_CODE 77)
    endforeach()
    # method_views: the composer's method and calibration operated by the mouse; rtn beside the
    # method in the Views, Compare and the teaching view, equal to castscope-cli's figures.
    add_test(NAME gui.method_views
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gui/method_views.py
        $<TARGET_FILE:castscope> $<TARGET_FILE:castscope_gui_check>
        ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/method_views $<TARGET_FILE:castscope-cli>)
    set_tests_properties(gui.method_views PROPERTIES LABELS gui TIMEOUT 300 RUN_SERIAL TRUE
      SKIP_RETURN_CODE 77)
    # method_cancel: the method job's progress line and its Cancel button.
    add_test(NAME gui.method_cancel
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gui/method_cancel.py
        $<TARGET_FILE:castscope> $<TARGET_FILE:castscope_gui_check>
        ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/method_cancel)
    set_tests_properties(gui.method_cancel PROPERTIES LABELS gui TIMEOUT 300 RUN_SERIAL TRUE
      SKIP_RETURN_CODE 77)
    # Metrics first and frames drawn while a 4096 x 4096 tensor's views update (the frame times
    # it prints are the 30 fps figure; docs/gui.md).
    add_test(NAME gui.responsive
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gui/responsive.py
        $<TARGET_FILE:castscope> ${CMAKE_CURRENT_BINARY_DIR}/gui_sessions/responsive)
    set_tests_properties(gui.responsive PROPERTIES LABELS gui TIMEOUT 300 RUN_SERIAL TRUE
      SKIP_RETURN_CODE 77)
  endif()
  # Every image of docs/screenshots made again from this build, each checked not blank, none
  # left without a session that makes it (written to the build tree, not to docs/).
  add_test(NAME gui.screenshots
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/screenshots.sh ${PROJECT_BINARY_DIR}
      ${CMAKE_CURRENT_BINARY_DIR}/gui_screenshots)
  set_tests_properties(gui.screenshots PROPERTIES LABELS gui TIMEOUT 900 RUN_SERIAL TRUE)
else()
  message(STATUS "CastScope: xvfb-run not found; scripted GUI sessions are not tested")
endif()
