# The views' analysis (widgets/src/analysis.cpp) runs on the device here; its tests compare the
# device views with the host ones.
target_link_libraries(${_t} PRIVATE castscope_analysis)
# The device checks of the cast kernels' fast paths are test code: their kernels and tests live in
# verify/ and are built only with the CUDA backend (nothing to check without it).
if(CASTSCOPE_CUDA)
  file(GLOB _verify CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gpu/verify/*.cu
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/verify/*.cpp)
  target_sources(${_t} PRIVATE ${_verify})
  target_include_directories(${_t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
  target_compile_options(${_t} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endif()
