#!/bin/sh
# The tensor types of the models in models.txt (one a line: a name and gguf-synth arguments, F32), one
# file NAME.types per model in OUTDIR listing "name type [shape]" sorted by name (gguf-dump's tensor
# lines without offsets: the quantizer writes in its own order).
#   types.sh quantize OUTDIR   llama.cpp's own quantizer (QUANTIZE: the 2026-09-28 reference's
#                              `quantize`, /work/shared/tools/llamacpp-ref/README.md) turns each model
#                              into Q4_K_M (llama_ftype 15): how this folder's *.types were made, with
#     PATH=build/bin:$PATH REF_BACKEND_DIR=$HOME/.cache/llamacpp-ref-3.22.1/bin/package/bins/linux-x64 \
#       QUANTIZE=$HOME/.cache/llamacpp-ref-3.22.1/quantize test/lit/Inputs/q4_k_m/types.sh quantize test/lit/Inputs/q4_k_m
#   types.sh synth TYPE OUTDIR gguf-synth --type TYPE --header-only writes each model (q4_K_M: its
#                              llama-quantize Q4_K_M types; test/lit/tools/gguf-synth/q4_k_m.test).
# gguf-synth and gguf-dump come from PATH.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
MODE=${1:?usage: types.sh quantize OUTDIR | types.sh synth TYPE OUTDIR}
case "$MODE" in
  quantize) OUT=${2:?OUTDIR}; : "${QUANTIZE:?set QUANTIZE to the reference's quantize tool}" ;;
  synth) TYPE=${2:?TYPE}; OUT=${3:?OUTDIR} ;;
  *) echo "types.sh: unknown mode '$MODE' (quantize or synth)" >&2; exit 1 ;;
esac
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
types() { gguf-dump "$1" | sed -n 's/^  \([^ ]*\)  *\([^ ]*\)  *\(\[[^]]*\]\) offset.*/\1 \2 \3/p' | LC_ALL=C sort; }
while read -r name args; do
  case "$name" in '' | '#'*) continue ;; esac
  if [ "$MODE" = quantize ]; then
    # shellcheck disable=SC2086
    gguf-synth $args -o "$WORK/$name.f32.gguf" > /dev/null
    "$QUANTIZE" "$WORK/$name.f32.gguf" "$WORK/$name.gguf" 15 > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; exit 1; }
  else
    # shellcheck disable=SC2086
    gguf-synth $args --type "$TYPE" --header-only -o "$WORK/$name.gguf" > /dev/null
  fi
  types "$WORK/$name.gguf" > "$OUT/$name.types"
done < "$HERE/models.txt"
