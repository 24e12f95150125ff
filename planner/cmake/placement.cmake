# Placement engine (llama.cpp's loader and ggml_backend_sched, ahead of time): layer map, buffer
# type selection, KV placement, scheduler passes and splits, fit check, explain reports.
add_library(stowage_placement STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/op_query.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/layer_map.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/buft_select.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/kv_place.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/scheduler.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/place_model.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/fit.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/placement/explain.cpp
)
# stowage_row_split (runtime/cmake/cuda.cmake): the CUDA backend's row split rules, plain C++ built in
# every configuration; the fit check counts split weights with them (no CUDA is linked).
target_link_libraries(stowage_placement PUBLIC stowage_memory stowage_manifest
  PRIVATE stowage_row_split nlohmann_json::nlohmann_json)
stowage_warnings(stowage_placement)
