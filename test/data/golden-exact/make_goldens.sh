#!/usr/bin/env bash
# Regenerates the golden-exact data of this folder (README.md): the reference llama.cpp of
# node-llama-cpp 3.21.1 (scripts/llamacpp-ref/fetch.sh fetches it into $REF when missing, default
# ~/.cache/stowage-bench/llamacpp-ref, the benchmark's) through refexact.cpp, on the shared models in $MODELS (default ../shared/models) and on synthetic
# mixture-of-experts models (moe-*.json: gguf-synth --arch A --type T, found on PATH or as $SYNTH;
# the test builds the same files with gguf-synth's library and checks their FNV-1a hash).
# Usage: make_goldens.sh [zen4|haswell|skylakex] [shared|long|moe|arch ...]
#   (default zen4 and every set: shared = the shared models on prompt.txt, long = long/, moe =
#   moe-*.json, arch = arch-*.json, the synthetic models of the newer architectures and the SWA ring)
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
[ $# -gt 0 ] && shift
SETS=" ${*:-shared long moe arch} "
want() { [[ "$SETS" == *" $1 "* ]]; }
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
want shared && for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M llama-2-tiny-random \
         tiny-tied-f32 tiny8-untied-q4_0 synth-Q4_K_M synth-Q6_K synth-IQ4_XS; do
  "$TMP/refexact" "$MODELS/$m.gguf" "$PROMPT" 32 512 > "$OUT/$m.json"
  echo "wrote $OUT/$m.json"
done

# long/: the prompt of test/data/golden-long (prompt-long.txt: 96 tokens, 70 with the 32000-word
# vocabulary) at n_ctx = n_batch = n_ubatch = 256 and 24 greedy tokens, as golden-long's refdump ran
# it, but with flash attention off as here (refdump ran llama.cpp 2026's default, -fa auto: on).
want long && mkdir -p "$OUT/long"
PROMPT_LONG=$(cat "$HERE/prompt-long.txt")
want long && for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0 stories260K-Q4_K_M llama-2-tiny-random \
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
# Adds the model file's FNV-1a 64 and the given key = value pairs to a refexact record (stdin).
annotate() {
  python3 -c '
import json, sys
g = json.load(sys.stdin)
h = 0xcbf29ce484222325
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    g[k] = v
g["model_fnv1a64"] = "%016x" % h
json.dump(g, sys.stdout)
print()' "$@"
}
want moe && for n in mixtral-f32 mixtral-f16 mixtral-q8_0 mixtral-q4_0 qwen2moe-f16 qwen2moe-q8_0; do
  read -r arch type <<< "${MOE[$n]}"
  "$SYNTH" --arch "$arch" --type "$type" -o "$TMP/$n.gguf" > /dev/null
  "$TMP/refexact" "$TMP/$n.gguf" "$PROMPT" 32 512 | annotate "$TMP/$n.gguf" synth_arch="$arch" synth_type="$type" \
    > "$OUT/moe-$n.json"
  echo "wrote $OUT/moe-$n.json"
done

# Synthetic models of the newer architectures (arch-<name>.json): test/data/golden-arch's models
# (its make_goldens.sh ARGS table, read from there: name -> gguf-synth arguments), here on the
# 240-character prompt (443 tokens with the generated vocabulary; golden_exact_test builds them with
# gguf-synth's library from its own table and checks the file's hash). llama-yarn / llama-ropefreqs
# get a Q8_0 twin (the F32 arguments with --type q8_0). gemma2 / gemma3: a sliding window of 8 under
# the prompt and soft-caps that bite; the SWA cache holds n_ctx = 512 cells (llama.cpp: min(n_ctx,
# pad(n_swa + n_ubatch, 256))), more than prompt + greedy tokens, so no cell is reused. yarn /
# mistral3: YaRN factor 4 over an original context of 16 (positions 0..474 run far past it).
eval "$(sed -n '/^declare -A ARGS=(/,/^)/p' "$HERE/../golden-arch/make_goldens.sh")"
for n in llama-yarn llama-ropefreqs; do ARGS[$n-q8_0]=${ARGS[$n-f32]/--type f32/--type q8_0}; done
# The interleaved-SWA ring (arch-<name>-ring-f32.json): gemma2-f32 / gemma3-f32 with a window of 40
# and n_ubatch 64 with swa_full off (refexact's 6th argument), so the SWA cache has min(512, pad(40 +
# 64, 256)) = 256 cells and the prompt wraps it: cells are reused as llama.cpp's find_slot reuses
# them, and the sums over the cache's cells (KQ softmax, KQV) meet the window's 40 keys in the
# wrapped order (their hashes differ from a full-size cache's; with a window of 8 they do not).
for n in gemma2 gemma3; do ARGS[$n-ring-f32]=${ARGS[$n-f32]/--sliding-window 8/--sliding-window 40}; done
# The mixture-of-experts architectures (golden-arch's qwen3moe, glm4moe, deepseek2 in both forms and
# gpt-oss models), and glm4moe-ties-f32: glm4moe-f32 with 32 experts whose routers are multiplied by 1000 and
# selection bias by 0 (gguf_scale_f32.py), so that about half of each token's sigmoid scores are
# exactly 1 and the top-k is the order ggml-cpu's ARGSORT gives ties.
ARGS[glm4moe-ties-f32]=${ARGS[glm4moe-f32]/--n-expert 8/--n-expert 32}
# deepseek2-legacy: the older deepseek2 form (one attn_kv_b per layer, run as MHA), values of 16.
for t in f32 q8_0; do
  l=${ARGS[deepseek2-$t]/--arch deepseek2/--arch deepseek2 --mla-legacy}
  : "${ARGS[deepseek2-legacy-$t]:=${l/--head-dim 24/--head-dim 24 --v-head-dim 16}}"
done
# deepseek2-groups: DeepSeek-V3's group-limited top-k, 16 experts in 4 groups of which 2 are used, 3
# experts used, seed 9 (golden-arch's deepseek2-groups models).
for t in f32 q8_0; do
  g=${ARGS[deepseek2-$t]/--n-expert 8 --n-expert-used 2/--n-expert 16 --n-expert-used 3 --n-expert-groups 4 --n-group-used 2}
  : "${ARGS[deepseek2-groups-$t]:=${g/--seed 3/--seed 9}}"
done
declare -A EDITS=([glm4moe-ties-f32]="ffn_gate_inp=1000 exp_probs_b=0")
want arch && for n in qwen3-f32 qwen3-q8_0 gemma2-f32 gemma2-q8_0 gemma3-f32 gemma3-q8_0 mistral3-f32 mistral3-q8_0 \
                       smollm3-f32 smollm3-q8_0 llama-yarn-f32 llama-yarn-q8_0 llama-ropefreqs-f32 llama-ropefreqs-q8_0 \
                       gemma2-ring-f32 gemma3-ring-f32 qwen3moe-f32 qwen3moe-q8_0 glm4moe-f32 glm4moe-q8_0 \
                       deepseek2-f32 deepseek2-q8_0 deepseek2-legacy-f32 deepseek2-legacy-q8_0 gpt-oss-f32 gpt-oss-q8_0 \
                       deepseek2-groups-f32 deepseek2-groups-q8_0 glm4moe-ties-f32; do
  ubatch=()
  [[ $n == *-ring-* ]] && ubatch=(off 64)
  # shellcheck disable=SC2086
  "$SYNTH" ${ARGS[$n]} -o "$TMP/$n.gguf" > /dev/null
  edits=()
  if [ -n "${EDITS[$n]:-}" ]; then
    # shellcheck disable=SC2086
    python3 "$HERE/gguf_scale_f32.py" "$TMP/$n.gguf" "$TMP/$n.edited.gguf" ${EDITS[$n]}
    mv "$TMP/$n.edited.gguf" "$TMP/$n.gguf"
    edits=(edits="${EDITS[$n]}")
  fi
  "$TMP/refexact" "$TMP/$n.gguf" "$PROMPT" 32 512 "${ubatch[@]}" |
    annotate "$TMP/$n.gguf" synth_args="${ARGS[$n]}" "${edits[@]}" > "$OUT/arch-$n.json"
  echo "wrote $OUT/arch-$n.json"
done
# gpt-oss as shipped: test/data/golden-arch/gpt-oss-mxfp4.gguf (the F32 model quantized by llama.cpp's
# quantize MXFP4_MOE; stored, gguf-synth writes MXFP4 only header-only).
if want arch; then
  "$TMP/refexact" "$HERE/../golden-arch/gpt-oss-mxfp4.gguf" "$PROMPT" 32 512 |
    annotate "$HERE/../golden-arch/gpt-oss-mxfp4.gguf" > "$OUT/arch-gpt-oss-mxfp4.json"
  echo "wrote $OUT/arch-gpt-oss-mxfp4.json"
fi

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
