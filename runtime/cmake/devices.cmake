# Device probing (list-devices): the CPU always; oneDNN and CUDA only when those stacks are built.
# Op tables come from the backends' own support functions (stowage_cpu, stowage_onednn, stowage_cuda).
add_library(stowage_devices STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/devices/cpu_probe.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/devices/op_support.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/devices/probe.cpp
)
target_include_directories(stowage_devices PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(stowage_devices PUBLIC stowage_base PRIVATE stowage_cpu)
if(STOWAGE_HAVE_ONEDNN)
  target_sources(stowage_devices PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/devices/onednn_probe.cpp)
  target_link_libraries(stowage_devices PRIVATE stowage_onednn DNNL::dnnl)
  target_compile_definitions(stowage_devices PRIVATE STOWAGE_DEVICES_HAVE_ONEDNN=1)
endif()
if(STOWAGE_HAVE_CUDA)
  target_sources(stowage_devices PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/devices/cuda_probe.cpp)
  target_link_libraries(stowage_devices PRIVATE stowage_cuda CUDA::cudart)
  target_compile_definitions(stowage_devices PRIVATE STOWAGE_DEVICES_HAVE_CUDA=1)
endif()
stowage_warnings(stowage_devices)
