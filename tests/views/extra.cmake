# The views' analysis on the host (widgets/src/analysis.cpp), checked against the engine's
# reference functions.
target_link_libraries(${_t} PRIVATE castscope_analysis)
