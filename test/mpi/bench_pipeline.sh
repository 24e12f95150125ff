#!/bin/bash
# The pipeline split's benchmark (not a ctest): pp512 and tg128 of MODEL (default the 0.85B q4_0
# llama of ~/.cache/stowage-bench) on 1, 2 and 3 ranks of this machine, 1 thread per rank, and
# --split cost against the memory split on bench-hetero-hosts.json (host 1 with 2 threads, host 2
# declared half as fast and given 1 thread). Prints one line per run: prompt and generation speed
# as rank 0 reports them.
#   usage: bench_pipeline.sh BIN_DIR REGISTRY_DIR [MODEL] [UBATCH]
set -eu
BIN=$1 REG=$2 M=${3:-$HOME/.cache/stowage-bench/llama-0.85b-L16-q4_0.gguf} UB=${4:-128}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
for i in $(seq 1 30); do printf 'the quick brown fox jumps over the lazy dog '; done > "$T/p.txt"
common=(--llamacpp-compat 2026 -c 1024 -ub "$UB" -b 512)
run=(-m "$M" -f "$T/p.txt" -n 128 --temp 0 --ignore-eos)
speeds() { grep -E "^(prompt eval|generation)" "$1" | sed 's/ \+/ /g' | tr '\n' ';'; }

"$BIN/plan-model" -m "$M" --device cpu "${common[@]}" -ngl 0 -o "$T/1.plan" > /dev/null
"$BIN/stowage-run" "${run[@]}" --plan "$T/1.plan" -t 1 > /dev/null 2> "$T/1.err"
echo "1 rank: $(speeds "$T/1.err")"
"$BIN/plan-model" -m "$M" --cluster "$REG/clusters/two-cpu-hosts.json" "${common[@]}" -ngl 9 -o "$T/2.plan" > /dev/null
"${MPI[@]}" -np 2 "$BIN/stowage-run" "${run[@]}" --plan "$T/2.plan" -t 1 > /dev/null 2> "$T/2.err"
echo "2 ranks (host 0 layers 0-7, host 1 8-15 + output): $(speeds "$T/2.err")"
"$BIN/plan-model" -m "$M" --cluster "$REG/clusters/three-cpu-hosts.json" "${common[@]}" -ngl 12 -o "$T/3.plan" > /dev/null
"${MPI[@]}" -np 3 "$BIN/stowage-run" "${run[@]}" --plan "$T/3.plan" -t 1 > /dev/null 2> "$T/3.err"
echo "3 ranks (host 0 layers 0-4, hosts 1-2 the rest by memory): $(speeds "$T/3.err")"

for split in memory cost; do
  "$BIN/plan-model" -m "$M" --cluster "$HERE/bench-hetero-hosts.json" "${common[@]}" -ngl 99 --split "$split" \
    -o "$T/$split.plan" --report > "$T/$split.log" 2>&1
  "${MPI[@]}" -np 1 "$BIN/stowage-run" "${run[@]}" --plan "$T/$split.plan" -t 1 : \
    -np 1 "$BIN/stowage-run" "${run[@]}" --plan "$T/$split.plan" -t 2 : \
    -np 1 "$BIN/stowage-run" "${run[@]}" --plan "$T/$split.plan" -t 1 > /dev/null 2> "$T/$split.err"
  echo "heterogeneous, --split $split ($(grep -E '^load_tensors: +MPI[12]:CPU model' "$T/$split.log" | sed 's/ \+/ /g' | tr '\n' ';')): $(speeds "$T/$split.err")"
  grep "split cost: -ts" "$T/$split.log" || true
done
