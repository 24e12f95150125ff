#!/usr/bin/env bash
# Regenerates the MXFP4 models and goldens of this folder (README.md). Needs gguf-synth (a build's
# bin/) on PATH and the reference llama.cpp of node-llama-cpp 3.22.1 (llama.cpp of 2026-09-28) in
# $REF (default ~/.cache/llamacpp-ref-3.22.1), which scripts/llamacpp-ref/fetch.sh fetches when
# missing (and builds its refdump and quantize).
# Usage: make_goldens.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NLC=3.22.1
REF=${REF:-$HOME/.cache/llamacpp-ref-$NLC}
ENVLINE=$(bash "$HERE/../../../scripts/llamacpp-ref/fetch.sh" --version "$NLC" "$REF" | tail -1)
REF_TOOLS=$(echo "$ENVLINE" | sed -n 's/^export .* REF_TOOLS=\([^ ]*\).*/\1/p')
export REF_BACKEND_DIR=${REF_BACKEND_DIR:-$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')}
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
# name -> gguf-synth arguments of the F32 model, and llama-quantize's ftype (38 = MXFP4_MOE) with
# its optional 'pure'. mixtral: MXFP4_MOE as llama.cpp ships gpt-oss (the 3-D expert tensors MXFP4,
# every other matrix Q8_0, the router and the norms F32). llama: a dense model with every matrix
# MXFP4 (pure), token embedding and output included.
declare -A ARGS=(
  [mixtral-mxfp4]="--arch mixtral --type f32 --n-ff 64 --n-expert 4 --n-expert-used 2"
  [llama-mxfp4]="--arch llama --type f32"
)
declare -A QUANT=([mixtral-mxfp4]="38" [llama-mxfp4]="38 pure")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for n in mixtral-mxfp4 llama-mxfp4; do
  gguf-synth ${ARGS[$n]} -o "$TMP/$n.f32.gguf" >/dev/null
  # shellcheck disable=SC2086
  "$REF_TOOLS/quantize" "$TMP/$n.f32.gguf" "$HERE/$n.gguf" ${QUANT[$n]} >/dev/null 2>&1
  "$REF_TOOLS/refdump" --fa off "$HERE/$n.gguf" "$PROMPT" 24 1 > "$TMP/$n.ref.json"
  python3 "$HERE/../golden-arch/reduce.py" "$TMP/$n.ref.json" "$HERE/$n.gguf" "${ARGS[$n]}" |
    python3 -c "import json,sys; d=json.load(sys.stdin); d['source']='refdump of node-llama-cpp@$NLC (llama.cpp 2026-09-28), CPU, n_ctx=n_batch=n_ubatch=256, flash attention off, 1 thread; the model: llama-quantize ftype ${QUANT[$n]} of gguf-synth synth_args'; json.dump(d, sys.stdout, separators=(',', ':'))" > "$HERE/$n.json"
  echo "wrote $HERE/$n.gguf, $HERE/$n.json"
done
