# The plan checksum (Plan.content_xxh64: SealPlan for writers, checked by the loader); the planner's
# exporter links it without the rest of the runtime.
add_library(stowage_plan_seal STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/plan/plan_seal.cpp)
target_include_directories(stowage_plan_seal PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include PRIVATE ${XXHASH_INCLUDE_DIR})
target_link_libraries(stowage_plan_seal PUBLIC stowage_base PRIVATE stowage_plan_schema ${XXHASH_LIBRARY})
stowage_warnings(stowage_plan_seal)

# The runtime library: plan loader, executor, backends (CPU; ACCEL/GPU when built).
add_library(stowage_runtime STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan/plan_file.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan/plan_check.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan/plan_graph.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/plan/plan_model.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/executor/session.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/executor/cpu_backend.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/executor/builtin_backends.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/executor/c_api.cpp
)
target_include_directories(stowage_runtime PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/executor)
target_link_libraries(stowage_runtime PUBLIC stowage_base PRIVATE stowage_cpu stowage_plan_schema stowage_plan_seal)
stowage_warnings(stowage_runtime)
