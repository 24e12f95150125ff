# GGUF container (owner: gguf). The reader is listed in runtime/CMakeLists.txt; the writer joins the
# same dependency-free library, stowage_base.
target_sources(stowage_base PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/gguf/writer.cpp)
# The vocabulary's size (gguf_vocab.h), read the same way by the planner and the tokenizer.
target_sources(stowage_base PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/gguf/vocab.cpp)
# The sliding window (gguf_sliding_window.h), read the same way by the planner and the runtime.
target_sources(stowage_base PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/gguf/sliding_window.cpp)
