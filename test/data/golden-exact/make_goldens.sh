#!/usr/bin/env bash
# Regenerates the golden-exact data of this folder (README.md): the reference llama.cpp of
# node-llama-cpp 3.21.1 (scripts/llamacpp-ref/fetch.sh fetches it into $REF when missing, default
# ~/.cache/stowage-bench/llamacpp-ref, the benchmark's) through refexact.cpp, on the shared models in $MODELS (default ../shared/models) and on synthetic
# mixture-of-experts models (moe-*.json: gguf-synth --arch A --type T, found on PATH or as $SYNTH;
# the test builds the same files with gguf-synth's library and checks their FNV-1a hash).
# Usage: make_goldens.sh [zen4|haswell|skylakex]   (default zen4)
#   zen4: llama.cpp's zen4 CPU library, into this folder; run it on an AVX-512 VNNI + BF16 CPU (where
#         ggml loads that variant by itself; the script refuses elsewhere).
#   haswell: llama.cpp's haswell library (AVX2 + FMA + F16C), into haswell/; any CPU with AVX2 runs
#         it (only that library is offered to ggml's loader).
#   skylakex: llama.cpp's skylakex library (AVX-512 without VNNI; any AVX-512 CPU runs it), into a
#         temporary folder, then checks that every file's logits hash equals the zen4 one of this
#         folder: golden_exact_test holds the AVX-512 kernels without VNNI to the zen4 goldens on
#         that ground (exit 1 naming the files that differ).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=${REF:-$HOME/.cache/stowage-bench/llamacpp-ref}
MODELS=${MODELS:-$ROOT/../shared/models}
SYNTH=${SYNTH:-gguf-synth}
VARIANT=${1:-zen4}
ENVLINE=$(bash "$ROOT/scripts/llamacpp-ref/fetch.sh" --version 3.21.1 "$REF" | tail -1)
B=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
# the library names carry the llama.cpp release (libllama.v0.4.0.so in 3.21.1)
LLAMA_SO=$(cd "$B" && ls libllama.v*.so | head -1)
GGML_SO=$(cd "$B" && ls libggml.v*.so | head -1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
case "$VARIANT" in
  zen4)
    has avx512_vnni && has avx512_bf16 || { echo "make_goldens: zen4 goldens need an AVX-512 VNNI + BF16 CPU" >&2; exit 1; }
    OUT=$HERE ;;
  haswell)
    has avx2 && has fma && has f16c || { echo "make_goldens: haswell goldens need AVX2 + FMA + F16C" >&2; exit 1; }
    OUT=$HERE/haswell
    mkdir -p "$OUT" "$TMP/backends"
    ln -s "$B/libggml-cpu-haswell.so" "$TMP/backends/" ;;
  skylakex)
    has avx512f && has avx512bw && has avx512vl && has avx512dq || { echo "make_goldens: skylakex needs AVX-512" >&2; exit 1; }
    OUT=$TMP/skylakex
    mkdir -p "$OUT" "$TMP/backends"
    ln -s "$B/libggml-cpu-skylakex.so" "$TMP/backends/" ;;
  *) echo "make_goldens: the variant is zen4, haswell or skylakex, not '$VARIANT'" >&2; exit 2 ;;
esac
if [ "$VARIANT" = zen4 ]; then export REF_BACKEND_DIR=$B; else export REF_BACKEND_DIR=$TMP/backends; fi
g++ -O1 -std=c++17 "$HERE/refexact.cpp" -o "$TMP/refexact" -I"$REF/include" -I"$REF/ggml/include" \
  -L"$B" -l:"$LLAMA_SO" -l:"$GGML_SO" -l:libggml-base.so -Wl,-rpath,"$B" -lxxhash
PROMPT=$(cat "$HERE/prompt.txt")
for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M llama-2-tiny-random \
         tiny-tied-f32 tiny8-untied-q4_0 synth-Q4_K_M synth-Q6_K synth-IQ4_XS; do
  "$TMP/refexact" "$MODELS/$m.gguf" "$PROMPT" 32 512 > "$OUT/$m.json"
  echo "wrote $OUT/$m.json"
done

# long/: the prompt of test/data/golden-long (prompt-long.txt: 96 tokens, 70 with the 32000-word
# vocabulary) at n_ctx = n_batch = n_ubatch = 256 and 24 greedy tokens, as golden-long's refdump ran
# it, but with flash attention off as here (refdump ran llama.cpp 2026's default, -fa auto: on).
mkdir -p "$OUT/long"
PROMPT_LONG=$(cat "$HERE/prompt-long.txt")
for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M llama-2-tiny-random \
         tiny-tied-f32 tiny-tied-q4_0 tiny-untied-q4_0 tiny8-untied-q4_0 synth-Q4_K_M synth-Q6_K synth-Q2_K \
         synth-IQ4_XS; do
  "$TMP/refexact" "$MODELS/$m.gguf" "$PROMPT_LONG" 24 256 off > "$OUT/long/$m.json"
  echo "wrote $OUT/long/$m.json"
done

# Synthetic MoE models: name -> "arch type" (gguf-synth's defaults otherwise).
declare -A MOE=(
  [mixtral-f32]="mixtral f32" [mixtral-f16]="mixtral f16" [mixtral-q8_0]="mixtral q8_0" [mixtral-q4_0]="mixtral q4_0"
  [qwen2moe-f16]="qwen2moe f16" [qwen2moe-q8_0]="qwen2moe q8_0"
)
for n in mixtral-f32 mixtral-f16 mixtral-q8_0 mixtral-q4_0 qwen2moe-f16 qwen2moe-q8_0; do
  read -r arch type <<< "${MOE[$n]}"
  "$SYNTH" --arch "$arch" --type "$type" -o "$TMP/$n.gguf" > /dev/null
  "$TMP/refexact" "$TMP/$n.gguf" "$PROMPT" 32 512 > "$TMP/$n.json"
  python3 - "$TMP/$n.json" "$TMP/$n.gguf" "$arch" "$type" > "$OUT/moe-$n.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
h = 0xcbf29ce484222325
for b in open(sys.argv[2], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
g["synth_arch"], g["synth_type"], g["model_fnv1a64"] = sys.argv[3], sys.argv[4], "%016x" % h
json.dump(g, sys.stdout)
print()
PY
  echo "wrote $OUT/moe-$n.json"
done

if [ "$VARIANT" = skylakex ]; then
  differ=0
  while read -r f; do
    rel=${f#"$OUT"/}
    a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logits_xxh64"])' "$f")
    b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logits_xxh64"])' "$HERE/$rel")
    if [ "$a" != "$b" ]; then echo "skylakex differs from zen4: $rel" >&2; differ=1; fi
  done < <(find "$OUT" -name '*.json')
  [ "$differ" = 0 ] && echo "skylakex: every logits hash equals the zen4 golden's"
  exit "$differ"
fi
