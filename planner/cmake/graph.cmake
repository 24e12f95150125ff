# The tensor table of every architecture (names, shapes, presence, consuming op), shared by the
# loaders below, gguf-synth and the tests' synthetic files; depends on stowage_base only.
add_library(stowage_arch_tensors STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_tensors.cpp)
target_include_directories(stowage_arch_tensors PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(stowage_arch_tensors PUBLIC stowage_base)
stowage_warnings(stowage_arch_tensors)

# Graph IR and per-architecture graph builders (llama.cpp load_tensors + build_<arch>).
add_library(stowage_graph STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/graph_builder.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/model_loader.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/model_graphs.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_common.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_llama.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_qwen2.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_phi3.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_gemma.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/graph/arch_mamba.cpp
)
target_include_directories(stowage_graph PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
# stowage_tokenizer: ReadHParams runs the runtime tokenizer's own check (Tokenizer::Validate), so
# that no plan is made for a model whose tokenizer stowage-run refuses (plain C++, no MLIR).
target_link_libraries(stowage_graph PUBLIC stowage_base stowage_arch_tensors stowage_tokenizer)
stowage_warnings(stowage_graph)
