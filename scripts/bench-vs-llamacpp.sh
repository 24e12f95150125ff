#!/usr/bin/env bash
# Benchmark (run on demand, not part of the tests): Stowage's CPU runtime against llama.cpp's
# prebuilt CPU library (npm node-llama-cpp@3.21.1) on the same synthetic models and thread count,
# in one run. Prints pp512 / tg128 tokens/s of both, the ratio stowage / llama.cpp, tg as a fraction
# of the memory-bandwidth bound (read bandwidth measured now / weight bytes read per token), and
# the peak resident memory of both. Before each model is measured, its file is put into the page
# cache as huge folios (tools/bench/hugewarm.c), so both runtimes map it with 2 MiB pages whatever
# the cache held before (tg speed follows that state: up to ~20% on this machine).
# Usage: scripts/bench-vs-llamacpp.sh [THREADS] [TYPES...]   (default: 2 threads; f16 q8_0 q4_0 q4_k_m)
# Env: BENCH_DIR (models and tools, default ~/.cache/stowage-bench), REPS (default 3),
#      N_PROMPT (512; 0 = generation only), N_GEN (128), SMALL=1 for a quick 4-layer model,
#      BUILD (the build directory whose bin/ holds stowage-run, gguf-synth, gguf-dump; default build),
#      STOWAGE_FLAGS (extra stowage-run flags, e.g. --huge-pages; printed with the table).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
THREADS=${1:-2}
shift || true
TYPES=("$@")
[ ${#TYPES[@]} -gt 0 ] || TYPES=(f16 q8_0 q4_0 q4_k_m)
BENCH_DIR=${BENCH_DIR:-$HOME/.cache/stowage-bench}
REPS=${REPS:-3}
N_PROMPT=${N_PROMPT:-512}
N_GEN=${N_GEN:-128}
REF=$BENCH_DIR/llamacpp-ref
BUILD=${BUILD:-build}
[ -x "$BUILD/bin/stowage-run" ] || { echo "bench-vs-llamacpp: $BUILD/bin/stowage-run not found (set BUILD)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"

# 1. llama.cpp reference (npm) and the two small harnesses.
ENVLINE=$(bash ../shared/tools/llamacpp-ref/fetch.sh "$REF" | tail -1)
export REF_BACKEND_DIR=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
B=$REF_BACKEND_DIR
gcc -O2 -std=gnu11 tools/bench/llama_bench_ref.c -o "$BENCH_DIR/llama_bench_ref" -I"$REF/include" -I"$REF/ggml/include" \
  -L"$B" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$B" -lm
gcc -O2 -fopenmp -march=native tools/bench/membw.c -o "$BENCH_DIR/membw"
gcc -O2 tools/bench/hugewarm.c -o "$BENCH_DIR/hugewarm"

# 2. Models: a 0.85B llama (n_embd 2048, 16 layers, GQA 32:8, n_ff 5632, vocab 32000).
LAYERS=16
[ "${SMALL:-0}" = 1 ] && LAYERS=4
SYNTH="./$BUILD/bin/gguf-synth --arch llama --n-layer $LAYERS --n-embd 2048 --n-head 32 --n-head-kv 8 --n-ff 5632 --n-vocab 32000 --seed 7 --untied"
model_for() {
  local t=$1 f="$BENCH_DIR/llama-0.85b-L$LAYERS-$1.gguf"
  if [ ! -f "$f" ]; then
    case $t in
      f16|q8_0|q4_0) $SYNTH --type "$t" -o "$f" >&2 ;;
      q4_k_m) [ -f "$BENCH_DIR/llama-0.85b-L$LAYERS-f16.gguf" ] || $SYNTH --type f16 -o "$BENCH_DIR/llama-0.85b-L$LAYERS-f16.gguf" >&2
              "$REF/quantize" "$BENCH_DIR/llama-0.85b-L$LAYERS-f16.gguf" "$f" 15 >&2 ;;
      *) echo "unknown type $t" >&2; return 1 ;;
    esac
  fi
  echo "$f"
}

# The bound uses the best of two probes (before and after the runs): the machine's bandwidth at its
# best, not whatever a noisy moment gave.
BW1=$("$BENCH_DIR/membw" "$THREADS" 1024)
STOWAGE_FLAGS=${STOWAGE_FLAGS:-}
ROWS=()
for t in "${TYPES[@]}"; do
  M=$(model_for "$t")
  # The same page-cache state for every file and run (huge folios; see tools/bench/hugewarm.c).
  "$BENCH_DIR/hugewarm" "$M" >&2
  S=$(./$BUILD/bin/stowage-run bench -m "$M" -p "$N_PROMPT" -n "$N_GEN" -r "$REPS" -t "$THREADS" $STOWAGE_FLAGS --json)
  L=$("$BENCH_DIR/llama_bench_ref" "$M" "$N_PROMPT" "$N_GEN" "$THREADS" "$REPS")
  ROWS+=("$t" "$M" "$S" "$L")
done
BW2=$("$BENCH_DIR/membw" "$THREADS" 1024)
BW=$(python3 -c "print(max($BW1, $BW2))")
echo "threads: $THREADS   read bandwidth (tools/bench/membw.c, before / after the runs): $BW1 / $BW2 GB/s, bound uses $BW   reps: $REPS   stowage-run flags: ${STOWAGE_FLAGS:-(none)}"
printf "| type | size GiB | stowage pp%d | llama.cpp pp%d | ratio | stowage tg%d | llama.cpp tg%d | ratio | tg bound | stowage %% of bound | llama.cpp %% of bound | peak RSS MiB (stowage / llama.cpp) |\n" \
  "$N_PROMPT" "$N_PROMPT" "$N_GEN" "$N_GEN"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for ((i = 0; i < ${#ROWS[@]}; i += 4)); do
  t=${ROWS[i]} M=${ROWS[i+1]} S=${ROWS[i+2]} L=${ROWS[i+3]}
  python3 - "$t" "$M" "$BW" "$S" "$L" "$BUILD" <<'PY'
import json, os, sys, subprocess
t, m, bw, s, l = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
d = json.loads(subprocess.run([sys.argv[6] + "/bin/gguf-dump", "--json", m], capture_output=True, text=True, check=True).stdout)
# weight bytes read per generated token: every weight but the token embeddings (one row via GET_ROWS)
per_tok = sum(x["nbytes"] for x in d["tensors"] if x["name"] != "token_embd.weight")
bound = bw * 1e9 / per_tok
size = os.path.getsize(m) / 2**30
ratio = lambda a, b: f"{a / b:.2f}" if b > 0 else "-"
print(f"| {t} | {size:.2f} | {s['pp_tps']:.2f} ± {s['pp_sd']:.2f} | {l['pp_tps']:.2f} ± {l['pp_sd']:.2f} | {ratio(s['pp_tps'], l['pp_tps'])} "
      f"| {s['tg_tps']:.2f} ± {s['tg_sd']:.2f} | {l['tg_tps']:.2f} ± {l['tg_sd']:.2f} | {ratio(s['tg_tps'], l['tg_tps'])} "
      f"| {bound:.2f} | {100*s['tg_tps']/bound:.0f}% | {100*l['tg_tps']/bound:.0f}% | {s['maxrss_kib']/1024:.0f} / {l['maxrss_kib']/1024:.0f} |")
PY
done
