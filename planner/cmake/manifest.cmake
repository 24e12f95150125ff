# Device capability manifests and the registry (plain C++, no MLIR).
add_library(stowage_manifest STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest/ggml_op.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest/manifest.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest/manifest_json.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest/registry.cpp
)
target_include_directories(stowage_manifest PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(stowage_manifest PUBLIC stowage_base PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(stowage_manifest PRIVATE
  STOWAGE_SOURCE_REGISTRY_DIR="${CMAKE_CURRENT_SOURCE_DIR}/registry")
stowage_warnings(stowage_manifest)

# Manifests of this machine's probed devices (needs the runtime's device probing).
add_library(stowage_manifest_probe STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest/from_probe.cpp)
target_include_directories(stowage_manifest_probe PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/manifest)
target_link_libraries(stowage_manifest_probe PUBLIC stowage_manifest stowage_devices)
stowage_warnings(stowage_manifest_probe)
