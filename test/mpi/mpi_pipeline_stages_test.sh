#!/bin/bash
# Pipeline stages across hosts under mpirun, beyond mpi_pipeline_test.sh:
#  * a prompt of many ubatches (-ub 8) pipelined through 2 and 3 ranks (rank i on ubatch k+1 while
#    rank i+1 runs ubatch k): logits bit-identical to the single-process run of the same plan;
#  * a plan of plan-model --split cost on a heterogeneous cluster (slow-and-fast-hosts.json): it
#    differs from the memory split and runs bit-identically under mpirun -np 3;
#  * a model whose weights exceed each host's memory: the single-host plan is refused by the fit
#    check, the 2-host plan runs under mpirun with every rank's buffers as planned.
#   usage: mpi_pipeline_stages_test.sh BIN_DIR REGISTRY_DIR MODELS_DIR LIT_CLUSTER_DIR
set -u
BIN=$1 REG=$2 MODELS=$3 CLUSTERS=$4
. "$(dirname "$0")/mpi_common.sh"

# run_both NAME MODEL PLAN NP PROMPT_FILE [-n N]: the plan in one process and under mpirun -np NP;
# logits (every generated token's) and text must be equal.
run_both() {
  local name=$1 model=$2 plan=$3 np=$4 prompt=$5
  local run=(-m "$model" --plan "$plan" -f "$prompt" -n 8 --temp 0 --ignore-eos -t 1)
  "$BIN/stowage-run" "${run[@]}" -q --dump-logits "$T/$name.ref.bin" > "$T/$name.ref.txt" 2> "$T/$name.ref.err" ||
    { fail "$name: single process"; cat "$T/$name.ref.err"; return 1; }
  "${MPI[@]}" -np "$np" "$BIN/stowage-run" "${run[@]}" --dump-logits "$T/$name.mpi.bin" \
    > "$T/$name.mpi.txt" 2> "$T/$name.mpi.err" || { fail "$name: mpirun -np $np"; cat "$T/$name.mpi.err"; return 1; }
  [ -s "$T/$name.mpi.bin" ] || { fail "$name: no logits"; return 1; }
  cmp -s "$T/$name.ref.bin" "$T/$name.mpi.bin" || { fail "$name: logits differ"; return 1; }
  cmp -s "$T/$name.ref.txt" "$T/$name.mpi.txt" || { fail "$name: text differs"; return 1; }
  echo "ok: $name (-np $np): $(stat -c %s "$T/$name.mpi.bin") bytes of logits bit-identical, text equal"
}

LLAMA=$MODELS/stories260K.gguf
# ~110 tokens: 14 ubatches of 8.
for i in $(seq 1 12); do printf 'Once upon a time, there was a little girl named Lily. '; done > "$T/long.txt"

if [ -f "$LLAMA" ]; then
  # Feb 2025 -ngl 99: host 0 the input, the stages on hosts 1 (and 2); 2026 -ngl 4 of 5 layers:
  # host 0's CPU holds layers 0-1, host 1 the rest and the output (no way back to host 0).
  for cfg in "ub2 two-cpu-hosts.json 2 --llamacpp-compat feb25 -ngl 99" \
    "ub3 three-cpu-hosts.json 3 --llamacpp-compat feb25 -ngl 99" \
    "ub2-2026 two-cpu-hosts.json 2 --llamacpp-compat 2026 -ngl 4 -c 4096"; do
    set -- $cfg
    name=$1 cluster=$2 np=$3; shift 3
    "$BIN/plan-model" -m "$LLAMA" --cluster "$REG/clusters/$cluster" "$@" -ub 8 -b 512 -o "$T/$name.plan" \
      > "$T/$name.plan.log" 2>&1 || { fail "$name: plan-model"; cat "$T/$name.plan.log"; continue; }
    run_both "$name" "$LLAMA" "$T/$name.plan" "$np" "$T/long.txt"
  done
  # The prompt is really split: the plan's ubatch is 8 tokens.
  grep -q "n_ubatch *= 8" "$T/ub2.plan.log" && echo "ok: ubatches of 8 tokens" ||
    { fail "ubatch size"; cat "$T/ub2.plan.log"; }

  # --split cost on the heterogeneous cluster: another split than by memory, run under mpirun.
  HET=$CLUSTERS/slow-and-fast-hosts.json
  "$BIN/plan-model" --llamacpp-compat feb25 -m "$LLAMA" -c 256 --cluster "$HET" -ngl 99 -ub 8 \
    -o "$T/mem.plan" --report > "$T/mem.log" 2>&1 || { fail "memory split plan"; cat "$T/mem.log"; }
  "$BIN/plan-model" --llamacpp-compat feb25 -m "$LLAMA" -c 256 --cluster "$HET" -ngl 99 -ub 8 --split cost \
    -o "$T/cost.plan" --report > "$T/cost.log" 2>&1 || { fail "cost split plan"; cat "$T/cost.log"; }
  if cmp -s <(grep "^host [12] " "$T/mem.log") <(grep "^host [12] " "$T/cost.log"); then
    fail "--split cost gave the memory split's hosts"
  else
    echo "ok: --split cost differs from the memory split: $(grep -m1 'split cost: -ts' "$T/cost.log")"
  fi
  run_both cost3 "$LLAMA" "$T/cost.plan" 3 "$T/long.txt"
else
  echo "SKIP: $LLAMA absent"
fi

# Too big for one host: 4 layers of 3.25 MiB (F32) and hosts of 10 MiB each, weights not mapped.
"$BIN/gguf-synth" --arch llama --n-layer 4 --n-embd 256 --n-ff 768 --n-head 4 --n-vocab 64 -o "$T/big.gguf" \
  > /dev/null || fail "gguf-synth"
"$BIN/plan-model" --llamacpp-compat feb25 -m "$T/big.gguf" -c 256 --no-mmap --device cpu --free CPU=10MiB \
  -o "$T/one.plan" > "$T/one.log" 2>&1 && fail "the single-host plan fits 10 MiB"
grep -q "does not fit: device CPU needs .* but has 10485760 bytes (10.00 MiB) available" "$T/one.log" &&
  echo "ok: one host refused: $(grep -m1 'does not fit' "$T/one.log")" || { fail "one-host message"; cat "$T/one.log"; }
cat > "$T/small-hosts.json" << 'EOF'
{ "cluster_version": 1, "description": "two hosts of 10 MiB",
  "hosts": [ { "name": "a", "devices": "cpu", "free": "CPU=10MiB" }, { "name": "b", "devices": "cpu", "free": "CPU=10MiB" } ],
  "links": [ { "hosts": [0, 1], "bandwidth_bytes_per_second": 1.25e9, "latency_seconds": 5e-5 } ] }
EOF
if "$BIN/plan-model" --llamacpp-compat feb25 -m "$T/big.gguf" -c 256 --no-mmap --cluster "$T/small-hosts.json" \
  -ngl 2 -o "$T/two.plan" --report > "$T/two.log" 2>&1; then
  echo "ok: split over two hosts fits: $(grep '^host 0 ' "$T/two.log"); $(grep '^host 1 ' "$T/two.log")"
  for i in 1 2 3 4 5 6; do printf 'one two three four five six seven eight '; done > "$T/short.txt"
  if run_both big2 "$T/big.gguf" "$T/two.plan" 2 "$T/short.txt"; then
    # Both ranks print their own buffers; none differs from the plan.
    for r in 0 1; do
      grep -q "memory allocated per buffer of host $r (MPI rank $r; planned == allocated)" "$T/big2.mpi.err" ||
        { fail "rank $r printed no buffers"; cat "$T/big2.mpi.err"; }
    done
    grep -q MISMATCH "$T/big2.mpi.err" && { fail "a rank's buffer differs from the plan"; grep MISMATCH "$T/big2.mpi.err"; }
    grep -A8 "host 1 (MPI rank 1; planned == allocated)" "$T/big2.mpi.err" | grep -q "MPI1:CPU" &&
      echo "ok: per-rank planned == allocated: $(grep -A8 'host 1 (MPI rank 1' "$T/big2.mpi.err" | grep -m1 'MPI1:CPU' | tr -s ' ')"
  fi
else
  fail "the two-host plan"; cat "$T/two.log"
fi
[ "$fails" -eq 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
