#!/usr/bin/env bash
# Benchmark (run on demand, not part of the tests): Stowage's CPU runtime against llama.cpp's
# prebuilt CPU library (npm node-llama-cpp, 3.21.1 unless NLC says otherwise, fetched with
# scripts/llamacpp-ref/fetch.sh) on the same synthetic models and thread count,
# in one run. Prints pp512 / tg128 tokens/s of both, the ratio stowage / llama.cpp, tg as a fraction
# of the memory-bandwidth bound, and the peak resident memory of both. Before each model is
# measured, its file is put into the page cache as huge folios (tools/bench/hugewarm.c), so both
# runtimes map it with 2 MiB pages whatever the cache held before (tg speed follows that state: up
# to ~20% on this machine).
#
# The bound. % of bound = tg t/s * bytes read per token (every weight but token_embd, from gguf-dump,
# of a MoE's expert stacks only the n_expert_used chosen experts' share, plus the F16 KV cache
# attended, averaged over the tg run's positions) / read bandwidth (tools/bench/membw.c: best of 5 reads of 512 MiB, ~50-100 ms, from
# one `membw THREADS 512 5 serve` process whose buffer is faulted in once). This VM's bandwidth is
# bimodal: a probe reads ~35-37 GB/s or ~58-62 GB/s with 2 threads (probably the two vCPUs on the
# same vs. different CCDs of the host EPYC), and a mode lasted from a few seconds to ~30 s in the
# runs seen. tg follows the mode where a runtime is bandwidth-bound (stowage q4_0, one build: 65 t/s at
# 34 GB/s, 92 t/s at 61 GB/s) and not where it is not (llama.cpp q4_0, 2 threads: ~62 t/s in both),
# so the % of bound depends on the mode. One probe for the whole run would make the % a draw of
# which mode the probe and each run saw, so every tg run is bracketed by probes: probe, one tg run
# (one process, -r 1: a warm-up tg then the measured one, ~4 s for the 0.85B models), probe, one tg
# run of the other runtime, probe, ... (the runtime that goes first alternates per repetition). A
# run's bound uses the mean of its two adjacent probes. A run is left out (and listed) when those
# probes differ by more than 15% (the mode changed during it) or when other processes used more
# than 10% of the CPUs during it and its probes (/proc/stat minus the run's own CPU time: someone's
# build; both runtimes then drop by up to 10x with 2 threads on 2 cores). A flip and back within
# one run is not seen. Kept runs are classed slow/fast by their probe: split at the midpoint
# between the lowest and highest probe adjacent to a kept run when those differ by more than 25%,
# else one class. The table gives, per type and mode, tg of both runtimes, their ratio and the % of
# bound (mean ± sd and count over that mode's runs), and a row 'all': the median % of bound over
# every kept run (mixing the modes) and the median tg ratio over repetitions whose two runs were
# kept in the same mode. pp has no bound: it runs in separate processes (REPS repetitions each, no
# probes; a note is printed when others used the CPUs meanwhile). The measuring loop is
# tools/bench/bench_vs_llamacpp.py.
# Usage: scripts/bench-vs-llamacpp.sh [THREADS] [TYPES...]   (default: 2 threads; f16 q8_0 q4_0 q4_k_m,
#        for ARCH=qwen3moe q4_0, for ARCH=gpt-oss q4_0 mxfp4; mxfp4: gguf-synth --type mxfp4, i.e.
#        llama-quantize's MXFP4_MOE for the MoE architectures (experts MXFP4, other matrices Q8_0)
#        and llama-quantize MXFP4_MOE pure (every matrix MXFP4) of the F16 model for the dense ones)
# Env: BENCH_DIR (models and tools, default ~/.cache/stowage-bench), REPS (tg runs per runtime and
#      pp repetitions, default 3), ARCH (llama, qwen3, gemma3, qwen3moe or gpt-oss; below), N_PROMPT (512; 0 = generation only), N_GEN (128), SMALL=1 for a
#      quick 4-layer model, BUILD (the build directory whose bin/ holds stowage-run, gguf-synth,
#      gguf-dump; default build), STOWAGE_FLAGS (extra stowage-run flags, e.g. --huge-pages;
#      printed with the table), RAW (a file: every run and probe as CSV), FA (flash attention on
#      both sides: off, the default, or on), NLC (the node-llama-cpp version, default 3.21.1; others
#      are fetched into BENCH_DIR/llamacpp-ref-NLC).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
THREADS=${1:-2}
shift || true
TYPES=("$@")
ARCH=${ARCH:-llama}
if [ ${#TYPES[@]} -eq 0 ]; then
  case $ARCH in
    qwen3moe) TYPES=(q4_0) ;;
    gpt-oss) TYPES=(q4_0 mxfp4) ;;
    *) TYPES=(f16 q8_0 q4_0 q4_k_m) ;;
  esac
fi
BENCH_DIR=${BENCH_DIR:-$HOME/.cache/stowage-bench}
REPS=${REPS:-3}
N_PROMPT=${N_PROMPT:-512}
N_GEN=${N_GEN:-128}
NLC=${NLC:-3.21.1}
if [ "$NLC" = 3.21.1 ]; then REF=$BENCH_DIR/llamacpp-ref; else REF=$BENCH_DIR/llamacpp-ref-$NLC; fi
BUILD=${BUILD:-build}
[ -x "$BUILD/bin/stowage-run" ] || { echo "bench-vs-llamacpp: $BUILD/bin/stowage-run not found (set BUILD)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"

# 1. llama.cpp reference (npm) and the two small harnesses.
ENVLINE=$(bash scripts/llamacpp-ref/fetch.sh --version "$NLC" "$REF" | tail -1)
export REF_BACKEND_DIR=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
REF_TOOLS=$(echo "$ENVLINE" | sed -n 's/^export .* REF_TOOLS=\([^ ]*\).*/\1/p')
B=$REF_BACKEND_DIR
# the library names carry the llama.cpp release (libllama.v0.4.0.so in 3.21.1, v0.5.0 in 3.22.1)
LLAMA_SO=$(cd "$B" && ls libllama.v*.so | head -1)
GGML_SO=$(cd "$B" && ls libggml.v*.so | head -1)
gcc -O2 -std=gnu11 tools/bench/llama_bench_ref.c -o "$BENCH_DIR/llama_bench_ref" -I"$REF/include" -I"$REF/ggml/include" \
  -L"$B" -l:"$LLAMA_SO" -l:"$GGML_SO" -l:libggml-base.so -Wl,-rpath,"$B" -lm
gcc -O2 -fopenmp -march=native tools/bench/membw.c -o "$BENCH_DIR/membw"
gcc -O2 tools/bench/hugewarm.c -o "$BENCH_DIR/hugewarm"

# 2. Models (ARCH): llama, a 0.85B llama (n_embd 2048, 16 layers, GQA 32:8, n_ff 5632, vocab 32000);
# qwen3, a 0.94B Qwen3 (n_embd 2048, 16 layers, GQA 16:8 of head size 128 with q/k norms, n_ff 6144,
# vocab 32000, tied embeddings as the small Qwen3 models); gemma3, Gemma-3-1B's shapes (n_embd 1152,
# 26 layers, 4 heads and 1 KV head of 256, n_ff 6912, vocab 262144, sliding window 512 in 5 of 6
# layers). The MoE models have ~1B active parameters (the weights one token reads, token_embd aside):
# qwen3moe, 1.07B active of 6.4B (20 layers, n_embd 2048, GQA 16:8 of 128 with q/k norms, 64 experts
# of width 768 as Qwen3-30B-A3B's, 8 used, vocab 32000, untied); gpt-oss, 0.97B active of 5.3B
# (gpt-oss-20b's layout at n_embd 2048: 16 layers, 64 heads of 64, 8 KV heads, 32 experts of width
# 1536, 4 used, window 128 in every other layer, YaRN 32 over 4096, vocab 32000).
LAYERS=16
case $ARCH in
  llama)  NAME=llama-0.85b; SHAPE="--n-embd 2048 --n-head 32 --n-head-kv 8 --n-ff 5632 --n-vocab 32000 --untied" ;;
  qwen3)  NAME=qwen3-0.94b; SHAPE="--n-embd 2048 --n-head 16 --n-head-kv 8 --head-dim 128 --n-ff 6144 --n-vocab 32000 --tied" ;;
  gemma3) NAME=gemma3-1b; LAYERS=26
          SHAPE="--n-embd 1152 --n-head 4 --n-head-kv 1 --head-dim 256 --n-ff 6912 --n-vocab 262144 --sliding-window 512 --n-ctx 32768" ;;
  qwen3moe) NAME=qwen3moe-a1b; LAYERS=20
          SHAPE="--n-embd 2048 --n-head 16 --n-head-kv 8 --head-dim 128 --n-ff 6144 --n-expert 64 --n-expert-used 8 --n-ff-exp 768 --n-vocab 32000 --untied" ;;
  gpt-oss) NAME=gpt-oss-a1b
          SHAPE="--n-embd 2048 --n-head 64 --n-head-kv 8 --head-dim 64 --n-ff 1536 --n-expert 32 --n-expert-used 4 --n-ff-exp 1536 --n-vocab 32000 --n-ctx 131072 --sliding-window 128 --rope-freq-base 150000 --rope-scaling yarn --rope-scale 32 --rope-orig-ctx 4096" ;;
  *) echo "bench-vs-llamacpp: ARCH must be llama, qwen3, gemma3, qwen3moe or gpt-oss" >&2; exit 1 ;;
esac
[ "${SMALL:-0}" = 1 ] && LAYERS=4
SYNTH="./$BUILD/bin/gguf-synth --arch $ARCH --n-layer $LAYERS $SHAPE --seed 7"
model_for() {
  local t=$1 f="$BENCH_DIR/$NAME-L$LAYERS-$1.gguf"
  if [ ! -f "$f" ]; then
    case $t in
      f16|q8_0|q4_0) $SYNTH --type "$t" -o "$f" >&2 ;;
      q4_k_m) [ -f "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" ] || $SYNTH --type f16 -o "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" >&2
              "$REF_TOOLS/quantize" "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" "$f" 15 >&2 ;;
      mxfp4)  if [ "$ARCH" = qwen3moe ] || [ "$ARCH" = gpt-oss ]; then $SYNTH --type mxfp4 -o "$f" >&2
              else [ -f "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" ] || $SYNTH --type f16 -o "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" >&2
                "$REF_TOOLS/quantize" "$BENCH_DIR/$NAME-L$LAYERS-f16.gguf" "$f" 38 pure >&2  # every matrix MXFP4
              fi ;;
      *) echo "unknown type $t" >&2; return 1 ;;
    esac
  fi
  echo "$f"
}

FA=${FA:-off}
case "$FA" in on) export REF_FA=1;; off) export REF_FA=0;; *) echo "bench-vs-llamacpp: FA must be on or off" >&2; exit 1;; esac
STOWAGE_FLAGS="${STOWAGE_FLAGS:-} -fa $FA"
MODELS=()
for t in "${TYPES[@]}"; do M=$(model_for "$t"); MODELS+=("$t=$M"); done
exec python3 tools/bench/bench_vs_llamacpp.py --build "$BUILD" --bench-dir "$BENCH_DIR" --threads "$THREADS" \
  --reps "$REPS" --n-prompt "$N_PROMPT" --n-gen "$N_GEN" --stowage-flags "$STOWAGE_FLAGS" --raw "${RAW:-}" "${MODELS[@]}"
