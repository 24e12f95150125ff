# CPU backend kernels (runtime/src/backends/cpu): library stowage_cpu.
# The generic sources stay baseline x86-64; the SIMD translation units get their own -m flags and
# are chosen at run time by CPUID (cpu_features.cpp), so one binary runs on any x86-64 CPU.
find_package(OpenMP REQUIRED COMPONENTS CXX)

set(stowage_cpu_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cpu)
add_library(stowage_cpu STATIC
  ${stowage_cpu_dir}/cpu_features.cpp
  ${stowage_cpu_dir}/quants.cpp
  ${stowage_cpu_dir}/kquants.cpp
  ${stowage_cpu_dir}/ops.cpp
  ${stowage_cpu_dir}/tensor_view.cpp
  ${stowage_cpu_dir}/op_params.cpp
  ${stowage_cpu_dir}/ops_moe.cpp
  ${stowage_cpu_dir}/ops_ssm.cpp
  ${stowage_cpu_dir}/ops_attn.cpp
  ${stowage_cpu_dir}/matmul.cpp
  ${stowage_cpu_dir}/repack.cpp
  ${stowage_cpu_dir}/row_kernels.cpp
  ${stowage_cpu_dir}/host_memory.cpp
)
# GEMM families (gemm.h): gemm_<family>.cpp is baseline code (lookup + scalar reference);
# gemm_<family>_avx2.cpp / gemm_<family>_avx512.cpp get the SIMD flags below.
file(GLOB stowage_cpu_gemm_generic CONFIGURE_DEPENDS ${stowage_cpu_dir}/gemm_*.cpp)
list(FILTER stowage_cpu_gemm_generic EXCLUDE REGEX "_(avx2|avx512)\\.cpp$")
target_sources(stowage_cpu PRIVATE ${stowage_cpu_gemm_generic})
target_include_directories(stowage_cpu PUBLIC ${stowage_cpu_dir})
target_link_libraries(stowage_cpu PUBLIC stowage_base OpenMP::OpenMP_CXX)
stowage_warnings(stowage_cpu)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  file(GLOB stowage_cpu_avx2_srcs CONFIGURE_DEPENDS ${stowage_cpu_dir}/gemm_*_avx2.cpp)
  file(GLOB stowage_cpu_avx512_srcs CONFIGURE_DEPENDS ${stowage_cpu_dir}/gemm_*_avx512.cpp)
  list(APPEND stowage_cpu_avx2_srcs ${stowage_cpu_dir}/simd_avx2.cpp)
  list(APPEND stowage_cpu_avx512_srcs ${stowage_cpu_dir}/simd_avx512.cpp)
  target_sources(stowage_cpu PRIVATE ${stowage_cpu_avx2_srcs} ${stowage_cpu_avx512_srcs})
  set_source_files_properties(${stowage_cpu_avx2_srcs} PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${stowage_cpu_avx512_srcs} PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-Wno-uninitialized;-Wno-maybe-uninitialized")
  # (GCC 12 warns about its own avx512fintrin.h reductions; the warnings are not about this code.)
  target_compile_definitions(stowage_cpu PRIVATE STOWAGE_CPU_HAVE_X86_SIMD=1)
endif()
