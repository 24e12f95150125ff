#!/usr/bin/env bash
# Regenerates the flash-attention goldens of this folder (see README.md): the reference llama.cpp of
# ../shared/tools/llamacpp-ref with -fa on, on the shared models. Needs the reference fetched into
# $REF (default ~/.cache/llamacpp-ref) and the models in $MODELS (default ../shared/models from the
# repository root). Usage: make_goldens.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=${REF:-$HOME/.cache/llamacpp-ref}
MODELS=${MODELS:-$ROOT/../shared/models}
B=$REF/bin/package/bins/linux-x64
export REF_BACKEND_DIR=${REF_BACKEND_DIR:-$B}
# llama.cpp of 2026 rotates quantized K/V caches (a Hadamard "attention rotation"); FEB25, which
# Stowage follows, has no such thing. Off, so the quantized-cache goldens are FEB25 arithmetic.
export LLAMA_ATTN_ROT_DISABLE=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# refdump.cpp unchanged, its llama_context_default_params() wrapped (fa_params.c).
gcc -O1 -c "$HERE/fa_params.c" -o "$TMP/fa_params.o" -I"$REF/include" -I"$REF/ggml/include"
g++ -O1 -std=c++17 "$ROOT/../shared/tools/llamacpp-ref/refdump.cpp" "$TMP/fa_params.o" -o "$TMP/refdump-fa" \
  -I"$REF/include" -I"$REF/ggml/include" -Wl,--wrap=llama_context_default_params \
  -L"$B" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$B"
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
  REF_FA=1 REF_CTK=$ctk REF_CTV=$ctv "$TMP/refdump-fa" "$MODELS/${MODEL[$n]}" "Once upon a time" 24 1 > "$HERE/$n.json"
  echo "wrote $HERE/$n.json"
done
