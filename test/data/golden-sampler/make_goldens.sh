#!/usr/bin/env bash
# Reference sampler chains from llama.cpp 2026-09-28 (node-llama-cpp 3.22.1's library; see
# ../../../../shared/tools/llamacpp-ref/README.md): builds refsampler.cpp against it and writes
# chains.txt, which sampler_chain_test (test/unit/runtime) compares SamplerChain with.
# Usage: make_goldens.sh   (rerun: it rewrites chains.txt byte for byte)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$HOME/.cache/llamacpp-ref-3.22.1
B=$D/bin/package/bins/linux-x64
[ -d "$B" ] || { echo "make_goldens.sh: $B not found: NLC=3.22.1 shared/tools/llamacpp-ref/fetch.sh first" >&2; exit 1; }
LLAMA=$(cd "$B" && ls libllama.v*.so | head -1)
GGML=$(cd "$B" && ls libggml.v*.so | head -1)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
g++ -O1 -std=c++17 "$HERE/refsampler.cpp" -o "$TMP/refsampler" -I"$D/include" -I"$D/ggml/include" \
  -L"$B" -l:"$LLAMA" -l:"$GGML" -l:libggml-base.so -Wl,-rpath,"$B"
REF_BACKEND_DIR=$B "$TMP/refsampler" > "$HERE/chains.txt"
