#!/usr/bin/env bash
# CUDA check for a machine with an NVIDIA GPU. Builds with CUDA, runs the CUDA backend
# tests (every op vs the CPU backend; whole models planned with -ngl 99 vs CPU-only plans, logits
# within tolerance), compares greedy text of a CPU plan and a GPU plan, and benchmarks pp512 / tg128
# with and without the GPU on synthetic llama models (F16, Q8_0, Q4_0). Optionally the same
# benchmark with llama.cpp's CUDA llama-bench for the ratio (LLAMA_BENCH=/path/to/llama-bench, e.g.
# from the npm package @node-llama-cpp/linux-x64-cuda@3.21.1, unpacked beforehand: the GPU machine
# may have no network).
#
# On a bare GPU machine without the build dependencies (flatbuffers, CLI11, nlohmann-json, gtest,
# xxhash), build here instead (same x86-64; nvcc 13 here matches the driver there) and carry the
# binaries: PREBUILT_BIN=<folder with cuda_backend_test, cuda_math_test, plan-model, stowage-run,
# gguf-synth, list-devices> skips the build; LD_LIBRARY_PATH may point at carried shared libraries.
# cuda_math_test (the kernels' arithmetic on the host, no GPU needed) runs first: when it fails, the
# GPU results below are not worth reading.
#
# Environment: BUILD_DIR (default build-cuda), CUDA_ARCHS (default "80;90"), JOBS (default nproc),
# STOWAGE_MODELS_DIR (shared models for the logit tests; default ../shared/models, skipped when
# absent), BENCH_LAYERS (default 16: synthetic model depth; 16 x 2048 wide ~ 1B parameters),
# OUT (folder for logs; default $BUILD_DIR/cuda-check). Exit status: non-zero when any step fails
# or when no CUDA device is visible (the point of this script is to run on one).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-cuda}
CUDA_ARCHS=${CUDA_ARCHS:-80;90}
JOBS=${JOBS:-$(nproc)}
BENCH_LAYERS=${BENCH_LAYERS:-16}
OUT=${OUT:-$BUILD_DIR/cuda-check}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt" || {
  echo "cuda-check: nvidia-smi failed: no GPU visible" >&2; exit 2; }

if [ -n "${PREBUILT_BIN:-}" ]; then
  BIN=$PREBUILT_BIN
  log "prebuilt binaries in $BIN"
else
log "configure + build ($BUILD_DIR, archs $CUDA_ARCHS)"
t0=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOWAGE_ENABLE_CUDA=ON -DSTOWAGE_ENABLE_MLIR=OFF \
  -DSTOWAGE_ENABLE_ONEDNN=AUTO "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS" >"$OUT/configure.log" 2>&1 || {
  tail -30 "$OUT/configure.log"; exit 1; }
targets="cuda_backend_test cuda_math_test async_copy_test row_split_test plan-model stowage-run list-devices gguf-synth"
ninja -C "$BUILD_DIR" -t targets all 2>/dev/null | grep -q '^onednn_backend_test:' && targets="$targets onednn_backend_test"
ninja -C "$BUILD_DIR" -j "$JOBS" $targets >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
log "build took $(( $(date +%s) - t0 )) s"
BIN=$BUILD_DIR/bin
fi
"$BIN/list-devices" | tee -a "$OUT/summary.txt"

log "CUDA kernel arithmetic on the host (cuda_math_test)"
if [ -x "$BIN/cuda_math_test" ]; then
  "$BIN/cuda_math_test" >"$OUT/cuda_math_test.log" 2>&1 || { log "cuda_math_test FAILED (see $OUT/cuda_math_test.log)"; exit 1; }
  grep -E '^\[  PASSED' "$OUT/cuda_math_test.log" | tee -a "$OUT/summary.txt"
fi

log "CUDA backend tests"
"$BIN/cuda_backend_test" --gtest_brief=0 2>&1 | tee "$OUT/cuda_backend_test.log" | grep -E '^\[ |max \|logit' | grep -vE 'RUN|       OK' || true
if ! grep -q '^\[  PASSED  \]' "$OUT/cuda_backend_test.log" || grep -q '^\[  FAILED  \]' "$OUT/cuda_backend_test.log"; then
  log "cuda_backend_test FAILED (see $OUT/cuda_backend_test.log)"; exit 1
fi
if grep -q 'skipped: no CUDA device' "$OUT/cuda_backend_test.log"; then
  log "cuda_backend_test skipped its device tests: the CUDA runtime sees no device"; exit 2
fi
grep -E 'CUDA vs CPU max' "$OUT/cuda_backend_test.log" | tee -a "$OUT/summary.txt" || true
# The executor's asynchronous copies and the row split rules (no GPU needed; cheap).
for t in async_copy_test row_split_test; do
  if [ -x "$BIN/$t" ]; then
    "$BIN/$t" >"$OUT/$t.log" 2>&1 || { log "$t FAILED (see $OUT/$t.log)"; exit 1; }
  fi
done
if [ -x "$BIN/onednn_backend_test" ]; then
  "$BIN/onednn_backend_test" >"$OUT/onednn_backend_test.log" 2>&1 || { log "onednn_backend_test FAILED"; exit 1; }
fi

log "synthetic models"
M=$OUT/models
mkdir -p "$M"
for t in f16 q8_0 q4_0; do
  [ -f "$M/synth-$t.gguf" ] || "$BIN/gguf-synth" --arch llama --n-layer "$BENCH_LAYERS" --n-embd 2048 --n-head 32 \
    --n-head-kv 8 --n-ff 8192 --n-vocab 32000 --n-ctx 4096 --type "$t" --seed 7 -o "$M/synth-$t.gguf" >/dev/null
done
ls -la "$M" | tee -a "$OUT/summary.txt"

log "greedy text: CPU plan vs GPU plan (-ngl 99)"
for t in f16 q8_0 q4_0; do
  "$BIN/plan-model" -m "$M/synth-$t.gguf" -c 1024 --n-gpu-layers 0 -o "$M/cpu-$t.plan" >"$OUT/plan-cpu-$t.log" 2>&1
  "$BIN/plan-model" -m "$M/synth-$t.gguf" -c 1024 --n-gpu-layers 99 -o "$M/gpu-$t.plan" >"$OUT/plan-gpu-$t.log" 2>&1
  grep -E 'offloaded|graph splits' "$OUT/plan-gpu-$t.log" | tee -a "$OUT/summary.txt" || true
  a=$("$BIN/stowage-run" -m "$M/synth-$t.gguf" --plan "$M/cpu-$t.plan" -p "a b c d" -n 16 --temp 0 -q 2>/dev/null)
  b=$("$BIN/stowage-run" -m "$M/synth-$t.gguf" --plan "$M/gpu-$t.plan" -p "a b c d" -n 16 --temp 0 -q 2>/dev/null)
  if [ "$a" = "$b" ]; then log "$t: same greedy text"; else log "$t: greedy text differs (CPU '$a' vs GPU '$b'; random weights make near-ties likely)"; fi
  # Half the layers on the GPU: split inputs cross in both directions every ubatch (asynchronous
  # cudaMemcpyAsync copies ordered by events, session_splits.cpp RunSplits).
  half=$(( BENCH_LAYERS / 2 ))
  "$BIN/plan-model" -m "$M/synth-$t.gguf" -c 1024 --n-gpu-layers "$half" -o "$M/half-$t.plan" >"$OUT/plan-half-$t.log" 2>&1
  grep -E 'graph splits' "$OUT/plan-half-$t.log" | tee -a "$OUT/summary.txt" || true
  h=$("$BIN/stowage-run" -m "$M/synth-$t.gguf" --plan "$M/half-$t.plan" -p "a b c d" -n 16 --temp 0 -q 2>/dev/null)
  if [ "$a" = "$h" ]; then log "$t: -ngl $half same greedy text"; else log "$t: -ngl $half greedy text differs (CPU '$a' vs '$h')"; fi
done

log "benchmark: pp512 / tg128, stowage CPU (-ngl 0) vs stowage CUDA (-ngl 99)"
for t in f16 q8_0 q4_0; do
  for p in cpu gpu; do
    "$BIN/stowage-run" bench -m "$M/synth-$t.gguf" --plan "$M/$p-$t.plan" -p 512 -n 128 -r 3 2>&1 | tee -a "$OUT/summary.txt" | grep -E '^\|' || true
  done
  if [ -n "${LLAMA_BENCH:-}" ]; then
    "$LLAMA_BENCH" -m "$M/synth-$t.gguf" -p 512 -n 128 -r 3 -ngl 99 2>/dev/null | grep -E '^\|' | tee -a "$OUT/summary.txt" || true
  fi
done
log "done: $OUT/summary.txt"
