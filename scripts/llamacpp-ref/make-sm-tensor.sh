#!/usr/bin/env bash
# References for -sm tensor (llama.cpp 2026 LLAMA_SPLIT_MODE_TENSOR): llama-completion of
# llama.cpp 3.22.1 (build-tools.sh's build, llama-completion as make-placement-2026.sh builds it) on
# two rpc-server processes on 127.0.0.1 (ports 50152, 50153) as the Meta device's GPU-type devices,
# on tiny gguf-synth models (stories260K's vocabulary), -v, one token. Writes the loader's lines
# (Meta device, buffer sizes, KV, flash attention) to test/data/sm-tensor/<case>.log.
# Not part of any test command. Run from the repository root after building gguf-synth.
set -euo pipefail
REF=${1:-$HOME/.cache/llamacpp-ref-3.22.1}
BT=$REF/build-tools
COMPLETION=$BT/build/bin/llama-completion
MODELS=${STOWAGE_MODELS:-$(cd .. && pwd)/shared/models}
SYNTH=build/bin/gguf-synth
OUT=test/data/sm-tensor
[ -x "$BT/bin/rpc-server" ] && [ -x "$COMPLETION" ] ||
  { echo "make-sm-tensor.sh: run scripts/llamacpp-ref/build-tools.sh and make-placement-2026.sh's build first" >&2; exit 1; }
source "$(dirname "$0")/rpc_servers.sh"
start_rpc_servers "$BT/bin/rpc-server" 50152 50153
mkdir -p "$OUT"
$SYNTH --arch llama --vocab-from "$MODELS/stories260K.gguf" --n-layer 2 -o "$TMP/llama.gguf" >/dev/null
$SYNTH --arch qwen3 --vocab-from "$MODELS/stories260K.gguf" --n-layer 2 --head-dim 32 -o "$TMP/qwen3.gguf" >/dev/null
$SYNTH --arch qwen3moe --vocab-from "$MODELS/stories260K.gguf" --n-layer 2 --head-dim 32 --n-expert 8 \
  --n-expert-used 2 --n-ff-exp 128 -o "$TMP/qwen3moe.gguf" >/dev/null
# case NAME MODEL ARGS...: the filtered loader lines (a refusal's lines too; the exit code is kept)
case_() {
  local name=$1 model=$2
  shift 2
  local rc=0
  "$COMPLETION" -m "$model" --rpc 127.0.0.1:50152,127.0.0.1:50153 -t 1 -n 1 -p hi -no-cnv --temp 0 -v \
    -c 256 -ngl 99 -fit off "$@" </dev/null >/dev/null 2>"$TMP/$name.err" || rc=$?
  sed 's/^[0-9.]* [A-Z] //' "$TMP/$name.err" |
    grep -E 'llama_prepare_model_devices|buffer size|llama_kv_cache: size|flash_attn|SPLIT_MODE_TENSOR|not implemented' \
      >"$OUT/$name.log" || true
  echo "exit $rc" >>"$OUT/$name.log"
  echo "$name: exit $rc, $(grep -c 'buffer size' "$OUT/$name.log") buffer lines"
}
case_ llama-2dev "$TMP/llama.gguf" -sm tensor -fa on
case_ llama-2dev-fa-off "$TMP/llama.gguf" -sm tensor -fa off
case_ qwen3-2dev "$TMP/qwen3.gguf" -sm tensor -fa on
case_ qwen3moe-2dev "$TMP/qwen3moe.gguf" -sm tensor -fa on
