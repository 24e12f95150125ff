#!/usr/bin/env bash
# Regenerates ring.txt (README.md): the XXH64 of llama.cpp's logits (node-llama-cpp 3.22.1,
# scripts/llamacpp-ref/fetch.sh fetches it into $REF when missing) for a tiny gemma2 (gguf-synth on
# PATH or $SYNTH; f32 and q8_0 weights) decoded past its 256-cell SWA ring, by ref_ring.cpp, with
# llama.cpp's zen4 CPU library (run on an AVX-512 VNNI + BF16 CPU) and its haswell library.
# Usage: make_golden.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=${REF:-$HOME/.cache/llamacpp-ref-3.22.1}
SYNTH=${SYNTH:-gguf-synth}
ENVLINE=$(bash "$ROOT/scripts/llamacpp-ref/fetch.sh" --version 3.22.1 "$REF" | tail -1)
B=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
LLAMA_SO=$(cd "$B" && ls libllama.v*.so | head -1)
GGML_SO=$(cd "$B" && ls libggml.v*.so | head -1)
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
has avx512_vnni && has avx512_bf16 || { echo "make_golden: the zen4 hashes need an AVX-512 VNNI + BF16 CPU" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/haswell"
ln -s "$B/libggml-cpu-haswell.so" "$TMP/haswell/"
g++ -O1 -std=c++17 "$HERE/ref_ring.cpp" -o "$TMP/ref_ring" -I"$REF/include" -I"$REF/ggml/include" \
  -L"$B" -l:"$LLAMA_SO" -l:"$GGML_SO" -l:libggml-base.so -Wl,-rpath,"$B" -lxxhash
{
  echo "# variant type swa_full first xxh64 (make_golden.sh; README.md)"
  for type in f32 q8_0; do
    "$SYNTH" --arch gemma2 --n-vocab 64 --sliding-window 8 --type "$type" -o "$TMP/$type.gguf" > /dev/null
    for variant in zen4 haswell; do
      dir=$B
      [ "$variant" = haswell ] && dir=$TMP/haswell
      for swa_full in 0 1; do
        for first in 16 8; do
          echo "$variant $type $swa_full $first $(REF_BACKEND_DIR=$dir "$TMP/ref_ring" "$TMP/$type.gguf" "$first" "$swa_full")"
        done
      done
    done
  done
} > "$HERE/ring.txt"
echo "wrote $HERE/ring.txt"
