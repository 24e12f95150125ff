#!/usr/bin/env bash
# The main job: plan a real model for this machine, inspect the plan, and generate text from it.
# Usage: scripts/demo.sh [MODEL.gguf] [PROMPT]   (default: ../shared/models/stories260K.gguf, or a
# model written by gguf-synth when that folder is absent)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=./build/bin
MODEL=${1:-../shared/models/stories260K.gguf}
PROMPT=${2:-Once upon a time}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
if [ $# -ge 1 ] && [ ! -f "$MODEL" ]; then
  echo "demo: $MODEL: no such model file" >&2
  exit 1
fi
if [ ! -f "$MODEL" ]; then
  echo "demo: $MODEL not found; generating a small random-weight llama model with gguf-synth" >&2
  MODEL=$OUT/synth-llama.gguf
  $BIN/gguf-synth --arch llama --n-layer 2 --n-embd 64 --n-head 4 --n-head-kv 2 --n-ff 128 --seed 1 -o "$MODEL"
fi
echo "== plan-model -m $MODEL -c 256 -o model.plan"
$BIN/plan-model -m "$MODEL" -c 256 -o "$OUT/model.plan"
echo
# One thread: the model is tiny (260K parameters), a second thread only adds synchronization.
echo "== stowage-run -m $MODEL --plan model.plan -p \"$PROMPT\" -n 64 --temp 0 -t 1"
$BIN/stowage-run -m "$MODEL" --plan "$OUT/model.plan" -p "$PROMPT" -n 64 --temp 0 -t 1
