# oneDNN ACCEL backend (runtime/src/backends/onednn): library stowage_onednn, linked into
# stowage_runtime only when the top level found oneDNN (STOWAGE_HAVE_ONEDNN). Owner: accel.
if(STOWAGE_HAVE_ONEDNN)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  add_library(stowage_onednn STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/onednn/onednn_backend.cpp)
  target_include_directories(stowage_onednn PUBLIC
    ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/onednn
    ${CMAKE_CURRENT_SOURCE_DIR}/src/executor)
  target_link_libraries(stowage_onednn PUBLIC stowage_base stowage_cpu PRIVATE DNNL::dnnl OpenMP::OpenMP_CXX)
  stowage_warnings(stowage_onednn)
  # runtime.cmake (which declares stowage_runtime) is included after this file: defer to the end of
  # runtime/CMakeLists.txt.
  cmake_language(DEFER CALL target_link_libraries stowage_runtime PRIVATE stowage_onednn)
  cmake_language(DEFER CALL target_compile_definitions stowage_runtime PRIVATE STOWAGE_HAVE_ONEDNN=1)
endif()
