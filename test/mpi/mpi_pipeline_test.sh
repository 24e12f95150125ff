#!/bin/bash
# Plans across hosts run under mpirun (plan-model --cluster, stowage-run rank h = host h), on this
# machine: every check compares the MPI run with the single-process run of the same plan (every
# host's devices in one process): logits bit for bit (--dump-logits) and the greedy text.
#   usage: mpi_pipeline_test.sh BIN_DIR REGISTRY_DIR MODELS_DIR
set -u
BIN=$1 REG=$2 MODELS=$3
. "$(dirname "$0")/mpi_common.sh"

# check NAME MODEL CLUSTER NP "PLAN FLAGS" [MPI FLAGS...]
check() {
  local name=$1 model=$2 cluster=$3 np=$4 pflags=$5; shift 5
  "$BIN/plan-model" -m "$model" --cluster "$REG/clusters/$cluster" $pflags --llamacpp-compat feb25 \
    -o "$T/$name.plan" > "$T/$name.plan.log" 2>&1 || { fail "$name: plan-model"; cat "$T/$name.plan.log"; return; }
  local run=(-m "$model" --plan "$T/$name.plan" -p "Once upon a time" -n 16 --temp 0 --ignore-eos -t 1 -q)
  "$BIN/stowage-run" "${run[@]}" --dump-logits "$T/$name.ref.bin" > "$T/$name.ref.txt" 2> "$T/$name.ref.err" ||
    { fail "$name: single process"; cat "$T/$name.ref.err"; return; }
  "${MPI[@]}" "$@" -np "$np" "$BIN/stowage-run" "${run[@]}" --dump-logits "$T/$name.mpi.bin" \
    > "$T/$name.mpi.txt" 2> "$T/$name.mpi.err" || { fail "$name: mpirun -np $np"; cat "$T/$name.mpi.err"; return; }
  cmp -s "$T/$name.ref.bin" "$T/$name.mpi.bin" || { fail "$name: logits differ"; return; }
  cmp -s "$T/$name.ref.txt" "$T/$name.mpi.txt" || { fail "$name: text differs"; return; }
  [ -s "$T/$name.mpi.bin" ] || { fail "$name: no logits"; return; }
  echo "ok: $name (-np $np $*): $(stat -c %s "$T/$name.mpi.bin") bytes of logits bit-identical, text equal"
}

LLAMA=$MODELS/stories260K.gguf
"$BIN/gguf-synth" --arch qwen3moe --n-vocab 64 --head-dim 32 --n-expert 8 --n-expert-used 2 --n-ff-exp 32 \
  -o "$T/qwen3moe.gguf" > /dev/null || fail "gguf-synth qwen3moe"
"$BIN/gguf-synth" --arch gemma3 --n-vocab 64 -o "$T/gemma3.gguf" > /dev/null || fail "gguf-synth gemma3"

if [ -f "$LLAMA" ]; then
  check llama-out0 "$LLAMA" two-cpu-hosts.json 2 "-ngl 3"           # output on host 0
  check llama-out1 "$LLAMA" two-cpu-hosts.json 2 "-ngl 99"          # output on host 1: its token goes back
  check llama-3 "$LLAMA" three-cpu-hosts.json 3 "-ngl 99"
  check llama-tcp "$LLAMA" two-cpu-hosts.json 2 "-ngl 4" --mca btl tcp,self --mca btl_tcp_if_include lo
else
  echo "SKIP: $LLAMA absent"
fi
check qwen3moe "$T/qwen3moe.gguf" two-cpu-hosts.json 2 "-c 256 -ngl 99"
check qwen3moe-3 "$T/qwen3moe.gguf" three-cpu-hosts.json 3 "-c 256 -ngl 99"
check gemma3 "$T/gemma3.gguf" two-cpu-hosts.json 2 "-c 256 -ngl 99"

# A plan for 2 hosts under 3 ranks: refused before loading, every rank non-zero.
if [ -f "$T/llama-out1.plan" ]; then
  "${MPI[@]}" -np 3 "$BIN/stowage-run" -m "$LLAMA" --plan "$T/llama-out1.plan" -p x -n 2 > /dev/null 2> "$T/np.err" &&
    fail "3 ranks for a 2-host plan accepted"
  grep -q "planned for 2 host(s) (plan-model --cluster), but mpirun started 3 rank(s)" "$T/np.err" &&
    echo "ok: host count vs world size refused" || { fail "host count message"; cat "$T/np.err"; }
  # Rank 1 given another GGUF: refused at load (model identity), every rank ends non-zero.
  "${MPI[@]}" -np 1 "$BIN/stowage-run" -m "$LLAMA" --plan "$T/llama-out1.plan" -p x -n 2 : \
    -np 1 "$BIN/stowage-run" -m "$MODELS/stories260K-F16.gguf" --plan "$T/llama-out1.plan" -p x -n 2 \
    > /dev/null 2> "$T/id.err" && fail "a rank with another GGUF accepted"
  grep -q "MPI rank 1 of 2 failed" "$T/id.err" && grep -qi "identity\|does not match\|differs" "$T/id.err" &&
    echo "ok: another GGUF on rank 1 refused at load" || { fail "identity message"; cat "$T/id.err"; }
  # A rank that stops answering (SIGSTOP) mid-generation: the others give up after --mpi-timeout
  # and every rank ends non-zero within seconds, naming the rank.
  start=$(date +%s)
  "${MPI[@]}" -np 2 "$BIN/stowage-run" -m "$LLAMA" --plan "$T/llama-out1.plan" -p x -n -1 --ignore-eos -t 1 \
    --mpi-timeout 2 > /dev/null 2> "$T/stop.err" &
  pid=$!
  sleep 1.5
  victim=$(pgrep -f "stowage-run -m $LLAMA --plan $T/llama-out1.plan -p x -n -1" | tail -1)
  [ -n "$victim" ] && kill -STOP "$victim"
  wait $pid; rc=$?
  [ -n "$victim" ] && kill -KILL "$victim" 2> /dev/null
  el=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ] && [ "$el" -lt 30 ] && grep -q "MPI rank [01] of 2 failed" "$T/stop.err"; then
    echo "ok: a stopped rank ends every rank in ${el}s (exit $rc): $(grep -m1 'within' "$T/stop.err")"
  else fail "stopped rank: exit $rc after ${el}s"; cat "$T/stop.err"; fi
  # A rank killed mid-generation: every rank ends non-zero within seconds, mpirun naming the rank.
  killed_rank_check "$LLAMA" "$T/llama-out1.plan"
fi
[ "$fails" -eq 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
