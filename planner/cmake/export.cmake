# Plan export (flatbuffers) with atomic file writes.
add_library(stowage_plan_export STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/export/plan_export.cpp)
target_link_libraries(stowage_plan_export PUBLIC stowage_memory stowage_placement stowage_plan_schema stowage_plan_seal)  # placement: ExplainRuleCode
stowage_warnings(stowage_plan_export)
