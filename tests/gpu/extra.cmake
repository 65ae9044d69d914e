# The views' analysis (widgets/src/analysis.cpp) runs on the device here; its tests compare the
# device views with the host ones.
target_link_libraries(${_t} PRIVATE castscope_analysis)
