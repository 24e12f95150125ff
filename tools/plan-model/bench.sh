#!/usr/bin/env bash
# Planning-time benchmark (not a timed test): plan-model on header-only models of real size
# (gguf-synth presets: Llama-3-405B on 8 x H200, a DeepSeek-V3-like 671B MoE with --n-cpu-moe), then
# the same architecture at 1x, 2x and 4x the layer count to show that planning time grows linearly.
# Usage: tools/plan-model/bench.sh BUILD_DIR [WORK_DIR]
set -euo pipefail
BIN=${1:?usage: bench.sh BUILD_DIR [WORK_DIR]}/bin
WORK=${2:-$(mktemp -d)}
mkdir -p "$WORK"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CPU=$SRC/test/lit/Inputs/manifests/llamacpp-cpu.json
H8=h200,h200,h200,h200,h200,h200,h200,h200,$CPU

plan() {  # MODEL ARGS... -> "<process wall seconds> s wall, <graph build + placement> ms planning"
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$("$BIN/plan-model" --timing -m "$@" | grep 'planning took')
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.3f s wall", $2 - $1}'
  echo ", ${line#plan-model: }"
}

"$BIN/gguf-synth" --preset llama3-405b --type q4_0 --header-only -o "$WORK/llama3-405b.gguf" > /dev/null
echo "Llama-3-405B (126 layers, q4_0) on 8 x H200, -ngl 999: $(plan "$WORK/llama3-405b.gguf" -c 8192 -ngl 999 --device "$H8")"
"$BIN/gguf-synth" --preset deepseek-v3-like --type q4_0 --header-only -o "$WORK/deepseek-v3-like.gguf" > /dev/null
echo "DeepSeek-V3-like (61 layers, 256 experts, q4_0) on 8 x H200, -ngl 999 --n-cpu-moe 40: $(plan "$WORK/deepseek-v3-like.gguf" -c 8192 -ngl 999 --n-cpu-moe 40 --device "$H8")"

for mult in 1 2 4; do
  n=$((32 * mult))
  "$BIN/gguf-synth" --arch llama --n-layer $n --n-embd 4096 --n-head 32 --n-head-kv 8 --n-ff 14336 --n-vocab 128256 \
    --type q4_0 --header-only -o "$WORK/llama-$n.gguf" > /dev/null
  echo "llama, $n layers ($mult x), 8 x H200: $(plan "$WORK/llama-$n.gguf" -c 8192 -ngl 999 --device "$H8")"
done
