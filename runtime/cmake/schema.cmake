# Plan file schema: flatc generates plan_generated.h into the build tree (Debian has no
# flatbuffers_generate_headers, so this is a custom command). Interface target stowage_plan_schema.
set(STOWAGE_PLAN_FBS ${CMAKE_CURRENT_SOURCE_DIR}/schema/plan.fbs)
set(STOWAGE_PLAN_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated/stowage/plan)
add_custom_command(
  OUTPUT ${STOWAGE_PLAN_GEN_DIR}/plan_generated.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${STOWAGE_PLAN_GEN_DIR}
  COMMAND ${FLATC_EXECUTABLE} --cpp --scoped-enums -o ${STOWAGE_PLAN_GEN_DIR} ${STOWAGE_PLAN_FBS}
  DEPENDS ${STOWAGE_PLAN_FBS}
  COMMENT "flatc: generating plan_generated.h")
add_custom_target(stowage_plan_schema_gen DEPENDS ${STOWAGE_PLAN_GEN_DIR}/plan_generated.h)
add_library(stowage_plan_schema INTERFACE)
add_dependencies(stowage_plan_schema stowage_plan_schema_gen)
target_include_directories(stowage_plan_schema INTERFACE ${CMAKE_CURRENT_BINARY_DIR}/generated)
target_link_libraries(stowage_plan_schema INTERFACE flatbuffers::flatbuffers)
