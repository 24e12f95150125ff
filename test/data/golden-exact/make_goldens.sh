#!/usr/bin/env bash
# Regenerates the golden-exact data of this folder (README.md): the reference llama.cpp of
# ../shared/tools/llamacpp-ref (fetched into $REF, default ~/.cache/stowage-bench/llamacpp-ref)
# through refexact.cpp, on the shared models in $MODELS (default ../shared/models). Run it on the
# machine kind whose llama.cpp build the goldens stand for (an AVX-512 VNNI CPU: the zen4 variant).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=${REF:-$HOME/.cache/stowage-bench/llamacpp-ref}
MODELS=${MODELS:-$ROOT/../shared/models}
B=$REF/bin/package/bins/linux-x64
export REF_BACKEND_DIR=${REF_BACKEND_DIR:-$B}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
g++ -O1 -std=c++17 "$HERE/refexact.cpp" -o "$TMP/refexact" -I"$REF/include" -I"$REF/ggml/include" \
  -L"$B" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$B" -lxxhash
PROMPT=$(cat "$HERE/prompt.txt")
for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M llama-2-tiny-random \
         tiny-tied-f32 tiny8-untied-q4_0 synth-Q4_K_M synth-Q6_K synth-IQ4_XS; do
  "$TMP/refexact" "$MODELS/$m.gguf" "$PROMPT" 32 512 > "$HERE/$m.json"
  echo "wrote $HERE/$m.json"
done
