#!/usr/bin/env bash
# Builds a reference program (SRC, C++17, llama.h) against llama.cpp 2026-09-28's CPU library as
# shared/tools/llamacpp-ref/fetch.sh brings it (NLC=3.22.1), into OUT; prints the REF_BACKEND_DIR
# the program needs. Used by golden-embd/ and golden-sampler/make_goldens.sh.
# Usage: build-llamacpp-ref-tool.sh SRC OUT
set -euo pipefail
D=$HOME/.cache/llamacpp-ref-3.22.1
B=$D/bin/package/bins/linux-x64
[ -d "$B" ] || { echo "build-llamacpp-ref-tool.sh: $B not found: NLC=3.22.1 shared/tools/llamacpp-ref/fetch.sh first" >&2; exit 1; }
LLAMA=$(cd "$B" && ls libllama.v*.so | head -1)
GGML=$(cd "$B" && ls libggml.v*.so | head -1)
g++ -O1 -std=c++17 "$1" -o "$2" -I"$D/include" -I"$D/ggml/include" \
  -L"$B" -l:"$LLAMA" -l:"$GGML" -l:libggml-base.so -Wl,-rpath,"$B"
echo "$B"
