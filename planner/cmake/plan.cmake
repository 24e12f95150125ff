# The planner's one entry point (planner::Plan, plan.h): context, fit, placement, -fa auto, fit
# check and serialization, as plan-model and stowage-run plan.
add_library(stowage_plan STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/plan/plan.cpp)
target_link_libraries(stowage_plan PUBLIC stowage_placement stowage_plan_export)
stowage_warnings(stowage_plan)
