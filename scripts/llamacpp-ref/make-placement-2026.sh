#!/usr/bin/env bash
# Makes the llama.cpp 2026 placement and --fit references of test/data/placement-2026 (README.md
# there): two rpc-server processes on 127.0.0.1 (ports 50052, 50053) are the GPU-type devices RPC0
# and RPC1, as ../../shared/golden/placement was made with llama.cpp of Feb 2025.
#   - fit/<case>.args: llama-fit-params' stdout, the "-c N -ngl N [-ts ..] [-ot ..]" line that
#     llama.cpp's --fit chooses (common_fit_params), and fit/<case>.log its trace (-v, filtered).
#     An rpc-server reports its host's memory (ggml-cpu: free = total = physical pages), so each
#     device's budget B MiB is given as a fit target -fitt (total MiB - B): free - target = B MiB
#     plus the sub-MiB part of total. fit/cases.txt lists per case: name, model, the -fitt values,
#     the free bytes each device reported and the arguments, which the lit tests give plan-model
#     (--free RPC0=<bytes> -fitt <targets>).
#   - load/<case>.log: the loader's lines of one configuration (llama-completion -v, one token):
#     layers, buffers and splits for -ngl 0/4/99 (-ts 512,256: the Feb 2025 goldens' split by
#     512 / 256 MiB free), -sm none -mg 1, -np 4 -kvu, --fit, a gemma2 SWA model and MoE expert
#     spill (-ot, --n-cpu-moe) of small gguf-synth models.
# Usage: scripts/llamacpp-ref/make-placement-2026.sh [REF_DIR]
#   REF_DIR: the fetched llama.cpp 3.22.1 folder (default ~/.cache/llamacpp-ref-3.22.1) whose
#   build-tools/ build-tools.sh made (rpc-server); llama-fit-params and llama-completion are built
#   there if missing.
#   Models: $STOWAGE_MODELS (default ../shared/models) and header-only files made by
#   build/bin/gguf-synth (the same commands as the lit tests). Run from the repository root.
# Not part of any test command: the lit tests read what it wrote.
set -euo pipefail
REF=${1:-$HOME/.cache/llamacpp-ref-3.22.1}
BT=$REF/build-tools
BIN=$BT/bin
OUT=test/data/placement-2026
MODELS=${STOWAGE_MODELS:-$(cd .. && pwd)/shared/models}
SYNTH=build/bin/gguf-synth
[ -x "$BIN/rpc-server" ] || { echo "make-placement-2026.sh: no $BIN/rpc-server (run scripts/llamacpp-ref/build-tools.sh first)" >&2; exit 1; }
[ -x "$SYNTH" ] || { echo "make-placement-2026.sh: no $SYNTH (build gguf-synth)" >&2; exit 1; }
# llama-fit-params and llama-completion (not among build-tools.sh's targets): two more targets
# of its build.
FITP=$BT/build/bin/llama-fit-params
COMPLETION=$BT/build/bin/llama-completion
if [ ! -x "$FITP" ] || [ ! -x "$COMPLETION" ]; then
  nice -n 10 cmake --build "$BT/build" -j2 --target llama-fit-params llama-completion
fi
source "$(dirname "$0")/rpc_servers.sh"
start_rpc_servers "$BIN/rpc-server" 50052 50053
mkdir -p "$OUT/fit" "$OUT/load"
MIB=1048576
TOTAL=$(($(getconf _PHYS_PAGES) * $(getconf PAGE_SIZE)))  # what each rpc-server reports, free and total
TOTAL_MIB=$((TOTAL / MIB))
RPC2=127.0.0.1:50052,127.0.0.1:50053

# The header-only models (the lit tests' gguf-synth commands).
$SYNTH --preset llama3-8b --type q4_0 --header-only -o "$TMP/llama3-8b-q4_0.gguf" >/dev/null
$SYNTH --preset llama3-70b --type q4_K --header-only -o "$TMP/llama3-70b-q4_K.gguf" >/dev/null
$SYNTH --arch qwen3moe --header-only --type q8_0 --n-layer 48 --n-embd 2048 --n-head 32 --n-head-kv 4 \
  --head-dim 128 --n-ff 6144 --n-expert 128 --n-expert-used 8 --n-ff-exp 768 --n-vocab 151936 --n-ctx 40960 \
  --rope-freq-base 1000000 --name Qwen3-30B-A3B -o "$TMP/qwen3-30b-a3b-q8_0.gguf" >/dev/null
$SYNTH --arch gpt-oss --header-only --type mxfp4 --pure --n-layer 24 --n-embd 2880 --n-head 64 --n-head-kv 8 \
  --head-dim 64 --n-ff 2880 --n-expert 32 --n-expert-used 4 --n-ff-exp 2880 --n-vocab 201088 --n-ctx 131072 \
  --sliding-window 128 --rope-freq-base 150000 --rope-scaling yarn --rope-scale 32 --rope-orig-ctx 4096 \
  --name gpt-oss-20b -o "$TMP/gpt-oss-20b-mxfp4.gguf" >/dev/null
$SYNTH --arch gemma2 --header-only --type q8_0 --n-layer 42 --n-embd 3584 --n-head 16 --n-head-kv 8 \
  --head-dim 256 --n-ff 14336 --n-vocab 256000 --n-ctx 8192 --sliding-window 4096 --name Gemma-2-9B \
  -o "$TMP/gemma2-9b-q8_0.gguf" >/dev/null
model_path() {
  case "$1" in
    tiny8) echo "$MODELS/tiny8-untied-q4_0.gguf" ;;
    *) echo "$TMP/$1.gguf" ;;
  esac
}

: >"$OUT/fit/cases.txt"
# fit CASE MODEL "BUDGETS_MIB" ARGS...: llama-fit-params on one (one budget) or two RPC devices.
fit() {
  local name=$1 model=$2 budgets=$3
  shift 3
  local fitt="" rpc=127.0.0.1:50052 free=""
  local i=0
  for b in $budgets; do
    fitt+="${fitt:+,}$((TOTAL_MIB - b))"
    free+="${free:+,}RPC$i=$TOTAL"
    i=$((i + 1))
  done
  [ $i -eq 2 ] && rpc=$RPC2
  "$FITP" -m "$(model_path "$model")" --rpc "$rpc" -fitt "$fitt" "$@" -v \
    >"$OUT/fit/$name.args" 2>"$TMP/$name.err" ||
    { tail -5 "$TMP/$name.err" >&2; echo "make-placement-2026.sh: fit $name failed" >&2; exit 1; }
  sed 's/^[0-9.]* [A-Z] //' "$TMP/$name.err" | grep -E '^(common_params_fit_impl|common_fit_params):' >"$OUT/fit/$name.log" || true
  echo "$name|$model|$fitt|$free|$*" >>"$OUT/fit/cases.txt"
  echo "fit $name: $(cat "$OUT/fit/$name.args")"
}
fit tiny8-1dev tiny8 "3" -c 256
fit tiny8-2dev tiny8 "2 1" -c 256
fit tiny8-2dev-roomy tiny8 "64 64" -c 256
fit llama3-8b-1dev llama3-8b-q4_0 "3000" -c 4096
fit llama3-8b-2dev llama3-8b-q4_0 "2500 1500" -c 4096
fit llama3-8b-ctx llama3-8b-q4_0 "5000" -c 0 -fitc 1024
fit llama3-70b-2dev llama3-70b-q4_K "20000 16000" -c 8192
fit qwen3moe-1dev qwen3-30b-a3b-q8_0 "8000" -c 4096
fit qwen3moe-2dev qwen3-30b-a3b-q8_0 "10000 8000" -c 4096
fit qwen3moe-ctx qwen3-30b-a3b-q8_0 "20000 12000" -c 0
fit gpt-oss-1dev gpt-oss-20b-mxfp4 "6000" -c 8192
fit gpt-oss-2dev gpt-oss-20b-mxfp4 "3000 3000" -c 8192
fit gemma2-1dev gemma2-9b-q8_0 "5000" -c 8192

# The small models of the load cases: a gemma2 (SWA) and a qwen3moe (experts) from gguf-synth.
# (stories260K's vocabulary: llama-completion cannot tokenize with gguf-synth's own small one.)
$SYNTH --arch gemma2 --vocab-from "$MODELS/stories260K.gguf" --n-layer 4 --sliding-window 64 \
  -o "$TMP/gemma2-tiny.gguf" >/dev/null
$SYNTH --arch qwen3moe --vocab-from "$MODELS/stories260K.gguf" --head-dim 32 --n-expert 8 --n-expert-used 2 \
  --n-ff-exp 32 -o "$TMP/qwen3moe-tiny.gguf" >/dev/null
# loader_lines: the loader's lines of a -v log on standard input, without the time and level:
# every info line and warning of load_tensors, done_getting_tensors, llama_context,
# llama_kv_cache(_iswa), sched_reserve and resolve_fused_ops and the loader's warnings (the lit
# tests' load-log comparison), the debug lines of the layer map, the weights moved and overridden
# and the compute buffers checked at exit, and the tool's own context lines (n_ctx, kv_unified).
loader_lines() {
  grep -E '^[0-9.]+ [IW] (load_tensors|done_getting_tensors|llama_context|llama_kv_cache|llama_kv_cache_iswa|sched_reserve|resolve_fused_ops): |^[0-9.]+ W llama_model_loader: |assigned to device|cannot be used with preferred|overridden|~llama_context|n_ctx +=|kv_unified' |
    sed -E 's/^[0-9.]+ [A-Z] //' || true
}
# load CASE MODEL ARGS...: the loader's lines of one configuration on the two RPC devices
# (llama-completion, one token, mmap on, -fit off unless the case fits): layers, buffers, splits.
load() {
  local name=$1 model=$2
  shift 2
  "$COMPLETION" -m "$(model_path "$model")" --rpc "$RPC2" -t 1 -n 1 -p hi -no-cnv --temp 0 -v "$@" \
    </dev/null >/dev/null 2>"$TMP/$name.err" ||
    { tail -5 "$TMP/$name.err" >&2; echo "make-placement-2026.sh: load $name failed" >&2; exit 1; }
  # With --fit, the load after the fit's trial loads only.
  awk '/ common_fit_params: / {n = NR} {l[NR] = $0} END {for (i = n + 1; i <= NR; i++) print l[i]}' \
    "$TMP/$name.err" | loader_lines >"$OUT/load/$name.log"
  echo "load $name: $(grep -c 'buffer size' "$OUT/load/$name.log") buffer lines"
}
rm -f "$OUT"/load/*.log
load tiny8-ngl0 tiny8 -c 256 -ngl 0 -ts 512,256 -fit off
load tiny8-ngl4 tiny8 -c 256 -ngl 4 -ts 512,256 -fit off
load tiny8-ngl99 tiny8 -c 256 -ngl 99 -ts 512,256 -fit off
load tiny8-sm-none-mg1 tiny8 -c 256 -ngl 99 -sm none -mg 1 -fit off
# -np 4 -kvu: llama-server's slots (llama-completion has no -kvu), stopped once it listens.
load_server() {
  local name=$1 model=$2
  shift 2
  "$BIN/llama-server" -m "$(model_path "$model")" --rpc "$RPC2" -t 1 --port 50060 -v "$@" \
    >/dev/null 2>"$TMP/$name.err" &
  local pid=$!
  for _ in $(seq 1 100); do
    grep -q 'server is listening' "$TMP/$name.err" && break
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  loader_lines <"$TMP/$name.err" >"$OUT/load/$name.log"
  echo "load $name: $(grep -c 'buffer size' "$OUT/load/$name.log") buffer lines"
}
load_server tiny8-np4 tiny8 -c 1024 -ngl 99 -ts 512,256 -np 4 -kvu -fit off
load tiny8-fit tiny8 -c 256 -fitt $((TOTAL_MIB - 2)),$((TOTAL_MIB - 1))
load gemma2-swa gemma2-tiny -c 1024 -ngl 99 -ts 512,256 -fit off
load qwen3moe-ot qwen3moe-tiny -c 256 -ngl 99 -ts 512,256 -ot 'blk\.(0|1)\.ffn_.*_exps=CPU' -fit off
load qwen3moe-ncmoe qwen3moe-tiny -c 256 -ngl 99 -ts 512,256 --n-cpu-moe 1 -fit off
echo "rpc total memory: $TOTAL bytes ($TOTAL_MIB MiB)" >"$OUT/machine.txt"
echo "wrote $OUT (llama.cpp $(cat "$BT/src/.commit" 2>/dev/null | cut -c1-7))"
