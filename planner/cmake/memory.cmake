# Static memory planning (buffers, offsets, compute arenas) and the CPU-only placement.
add_library(stowage_memory STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/memory/memory_plan.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/memory/place_cpu.cpp
)
target_link_libraries(stowage_memory PUBLIC stowage_graph)
stowage_warnings(stowage_memory)
