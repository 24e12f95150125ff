#!/usr/bin/env bash
# Reference embeddings from llama.cpp 2026-09-28 (node-llama-cpp 3.22.1's CPU library; see
# ../../../../shared/tools/llamacpp-ref/README.md): refembd.cpp, built here against that library, runs
# the prompt with llama_context_params.embeddings on and each pooling type (0 none, 1 mean, 2 cls,
# 3 last) and writes <model>-<pooling>.txt: line 1 the prompt's token ids (BOS added), then one
# line of n_embd floats per token (none) or the sequence's pooled embedding. embeddings_test
# (test/unit/runtime) compares Stowage's Session embeddings with them.
# Usage: make_goldens.sh [MODELS_DIR]   (rerun: it rewrites the committed files byte for byte)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=${1:-$HERE/../../../../shared/models}
D=$HOME/.cache/llamacpp-ref-3.22.1
B=$D/bin/package/bins/linux-x64
[ -d "$B" ] || { echo "make_goldens.sh: $B not found: NLC=3.22.1 shared/tools/llamacpp-ref/fetch.sh first" >&2; exit 1; }
LLAMA=$(cd "$B" && ls libllama.v*.so | head -1)
GGML=$(cd "$B" && ls libggml.v*.so | head -1)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
g++ -O1 -std=c++17 "$HERE/refembd.cpp" -o "$TMP/refembd" -I"$D/include" -I"$D/ggml/include" \
  -L"$B" -l:"$LLAMA" -l:"$GGML" -l:libggml-base.so -Wl,-rpath,"$B"
export REF_BACKEND_DIR=$B
PROMPT="Once upon a time, there was a little dog"
names=(none mean cls last)
for m in stories260K stories260K-Q8_0; do
  for p in 0 1 2 3; do
    "$TMP/refembd" "$MODELS/$m.gguf" "$PROMPT" $p 2 > "$HERE/$m-${names[p]}.txt"
  done
done
