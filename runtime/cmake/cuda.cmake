# CUDA GPU backend (runtime/src/backends/cuda): library stowage_cuda, linked into stowage_runtime
# only when the top level found nvcc + the toolkit (STOWAGE_HAVE_CUDA). Owner: accel.
# Two compile units: cuda_backend.cpp (host C++, g++) and kernels.cu (nvcc, architectures from
# CMAKE_CUDA_ARCHITECTURES, 80;90 by default). cuBLAS is loaded at run time (dlopen), see below.
# The row-split rules (row_split.cpp) are plain C++: built in every configuration, so their unit
# test (test/unit/backends/row_split_test.cpp) runs on machines without CUDA.
add_library(stowage_row_split STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/row_split.cpp)
target_include_directories(stowage_row_split PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda)
stowage_warnings(stowage_row_split)
# The kernels' per-element arithmetic and indexing (cuda_math.h, __host__ __device__ inline
# functions): header-only, built by the C++ compiler too, so test/unit/backends/cuda_math_test.cpp
# checks it against the CPU backend on machines without CUDA.
add_library(stowage_cuda_math INTERFACE)
target_include_directories(stowage_cuda_math INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda)
if(STOWAGE_HAVE_CUDA)
  set(stowage_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda)
  add_library(stowage_cuda STATIC ${stowage_cuda_dir}/cuda_backend.cpp ${stowage_cuda_dir}/kernels.cu)
  target_include_directories(stowage_cuda PUBLIC ${stowage_cuda_dir} ${CMAKE_CURRENT_SOURCE_DIR}/src/executor)
  # cuBLAS is not linked: cuda_backend.cpp loads it (dlopen) when it makes the first device context,
  # so CPU-only runs of this build do not map it (its static initializers cost ~130 MiB of resident
  # memory at start-up). Its headers are still used (signatures).
  get_target_property(stowage_cublas_inc CUDA::cublas INTERFACE_INCLUDE_DIRECTORIES)
  target_link_libraries(stowage_cuda PUBLIC stowage_base stowage_cpu stowage_row_split stowage_cuda_math CUDA::cudart
    PRIVATE ${CMAKE_DL_LIBS})
  if(stowage_cublas_inc)
    target_include_directories(stowage_cuda PRIVATE ${stowage_cublas_inc})
  endif()
  # Fallback folder for the dlopen: cuBLAS's own (which may differ from cudart's, e.g. NVHPC's math_libs).
  get_target_property(stowage_cublas_lib CUDA::cublas IMPORTED_LOCATION)
  if(stowage_cublas_lib)
    get_filename_component(stowage_cublas_dir "${stowage_cublas_lib}" DIRECTORY)
  else()
    set(stowage_cublas_dir "${CUDAToolkit_LIBRARY_DIR}")
  endif()
  target_compile_definitions(stowage_cuda PRIVATE STOWAGE_CUBLAS_DIR="${stowage_cublas_dir}")
  target_compile_options(stowage_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-O3>)
  set_target_properties(stowage_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  # runtime.cmake (stowage_runtime) is included after this file: defer to the end of runtime/CMakeLists.txt.
  cmake_language(DEFER CALL target_link_libraries stowage_runtime PRIVATE stowage_cuda)
  cmake_language(DEFER CALL target_compile_definitions stowage_runtime PRIVATE STOWAGE_HAVE_CUDA=1)
endif()
