#!/usr/bin/env bash
# Reference embeddings from llama.cpp 2026-09-28 (node-llama-cpp 3.22.1's CPU library; see
# ../../../../shared/tools/llamacpp-ref/README.md): refembd.cpp, built against that library
# (../build-llamacpp-ref-tool.sh), runs the prompt with llama_context_params.embeddings on and each
# pooling type (0 none, 1 mean, 2 cls, 3 last) and writes <model>-<pooling>.txt: line 1 the prompt's
# token ids (BOS added), then one line of n_embd floats per token (none) or the sequence's pooled
# embedding. embeddings_test (test/unit/runtime) compares Stowage's Session embeddings with them.
# Usage: make_goldens.sh [MODELS_DIR]   (rerun: it rewrites the committed files byte for byte)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=${1:-$HERE/../../../../shared/models}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
REF_BACKEND_DIR=$("$HERE/../build-llamacpp-ref-tool.sh" "$HERE/refembd.cpp" "$TMP/refembd")
export REF_BACKEND_DIR
PROMPT="Once upon a time, there was a little dog"
names=(none mean cls last)
for m in stories260K stories260K-Q8_0; do
  for p in 0 1 2 3; do
    "$TMP/refembd" "$MODELS/$m.gguf" "$PROMPT" $p 2 > "$HERE/$m-${names[p]}.txt"
  done
done
