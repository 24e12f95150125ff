#!/usr/bin/env bash
# Regenerates the flash-attention goldens of this folder (see README.md): the reference llama.cpp
# (node-llama-cpp 3.21.1, scripts/llamacpp-ref) with -fa on, on the shared models. Uses the reference
# in $REF (default ~/.cache/llamacpp-ref; scripts/llamacpp-ref/fetch.sh fetches it there when
# missing and builds its refdump) and the models in $MODELS (default ../shared/models from the
# repository root). Usage: make_goldens.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=${REF:-$HOME/.cache/llamacpp-ref}
MODELS=${MODELS:-$ROOT/../shared/models}
ENVLINE=$(bash "$ROOT/scripts/llamacpp-ref/fetch.sh" --version 3.21.1 "$REF" | tail -1)
B=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
REF_TOOLS=$(echo "$ENVLINE" | sed -n 's/^export .* REF_TOOLS=\([^ ]*\).*/\1/p')
export REF_BACKEND_DIR=${REF_BACKEND_DIR:-$B}
# llama.cpp of 2026 rotates quantized K/V caches (a Hadamard "attention rotation"); FEB25, which
# Stowage follows, has no such thing. Off, so the quantized-cache goldens are FEB25 arithmetic.
export LLAMA_ATTN_ROT_DISABLE=1
# name -> model file, K and V cache types (ggml type ids: 1 f16, 2 q4_0, 8 q8_0, 20 iq4_nl). The prompt and token
# count are the shared goldens' (../shared/golden/logits).
declare -A MODEL=(
  [stories260K]=stories260K.gguf [stories260K-F16]=stories260K-F16.gguf [stories260K-Q8_0]=stories260K-Q8_0.gguf
  [stories260K-Q4_0]=stories260K-Q4_0.gguf [stories260K-Q4_K_M]=stories260K-Q4_K_M.gguf
  [tiny-tied-f32]=tiny-tied-f32.gguf [tiny8-untied-q4_0]=tiny8-untied-q4_0.gguf
  [tiny-tied-f32-kv-q8_0]=tiny-tied-f32.gguf [tiny-tied-f32-kv-q4_0]=tiny-tied-f32.gguf
  [tiny-tied-f32-v-iq4_nl]=tiny-tied-f32.gguf
)
declare -A CT=([tiny-tied-f32-kv-q8_0]="8 8" [tiny-tied-f32-kv-q4_0]="2 2" [tiny-tied-f32-v-iq4_nl]="1 20")
for n in "${!MODEL[@]}"; do
  read -r ctk ctv <<< "${CT[$n]:-1 1}"
  "$REF_TOOLS/refdump" --fa on --ctk "$ctk" --ctv "$ctv" "$MODELS/${MODEL[$n]}" "Once upon a time" 24 1 > "$HERE/$n.json"
  echo "wrote $HERE/$n.json"
done
