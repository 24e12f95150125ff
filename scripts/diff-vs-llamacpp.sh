#!/usr/bin/env bash
# Bit-for-bit comparison of the CPU backend's kernels and ops with llama.cpp's CPU library (run on
# demand, not part of the tests: it fetches npm node-llama-cpp's prebuilt libggml like the
# benchmark, with scripts/llamacpp-ref/fetch.sh). Builds tools/bench/ggml_diff.cpp once per ISA
# level against the libggml-cpu variant llama.cpp would load for it (AVX-512: zen4 when the CPU has
# AVX512-VNNI and -BF16, else skylakex; AVX2: haswell) and prints, per vec_dot / activation
# quantizer / op, how many results differ. Exit status 1 when any differ.
# Usage: scripts/diff-vs-llamacpp.sh   Env: BUILD (build directory with lib/*.a, default build),
#        BENCH_DIR (where the reference is fetched, default ~/.cache/stowage-bench), NLC (the
#        node-llama-cpp version, default 3.21.1; others go to BENCH_DIR/llamacpp-ref-NLC), REF (the
#        reference's folder instead, e.g. ~/.cache/llamacpp-ref where fetch.sh put it by default).
# The ops of the newer architectures (GELU/GEGLU, SCALE, YaRN ROPE, ...) are compared with
# llamacpp_numerics on, where the CPU kernels follow llama.cpp's GCC FMA contractions.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-$HOME/.cache/stowage-bench}
NLC=${NLC:-3.21.1}
if [ -z "${REF:-}" ]; then
  if [ "$NLC" = 3.21.1 ]; then REF=$BENCH_DIR/llamacpp-ref; else REF=$BENCH_DIR/llamacpp-ref-$NLC; fi
fi
[ -f "$BUILD/lib/libstowage_cpu.a" ] || { echo "diff-vs-llamacpp: $BUILD/lib/libstowage_cpu.a not found (set BUILD)" >&2; exit 2; }
mkdir -p "$BENCH_DIR"
ENVLINE=$(bash scripts/llamacpp-ref/fetch.sh --version "$NLC" "$REF" | tail -1)
B=$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
runs=()
if has avx512f && has avx512bw && has avx512vl; then
  if has avx512_vnni && has avx512_bf16; then runs+=("zen4:avx512"); else runs+=("skylakex:avx512"); fi
fi
has avx2 && has fma && has f16c && runs+=("haswell:avx2")
[ ${#runs[@]} -gt 0 ] || { echo "diff-vs-llamacpp: this CPU has neither AVX2 nor AVX-512" >&2; exit 2; }
status=0
for r in "${runs[@]}"; do
  variant=${r%%:*} level=${r##*:}
  exe="$BENCH_DIR/ggml-diff-$variant"
  g++ -O2 -std=c++17 tools/bench/ggml_diff.cpp -o "$exe" -I"$REF/ggml/include" -Iruntime/src/backends/cpu -Iruntime/src/executor \
    -Iruntime/include -Iruntime/src -Wl,--start-group "$BUILD"/lib/*.a -Wl,--end-group \
    -L"$B" -l:libggml-cpu-"$variant".so -l:libggml-base.so -Wl,-rpath,"$B" -fopenmp -lpthread
  echo "== libggml-cpu-$variant.so"
  "$exe" "$level" || status=1
done
exit $status
