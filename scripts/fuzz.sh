#!/usr/bin/env bash
# Fuzzes with libFuzzer, FUZZ_SECONDS in all (default 60) shared evenly by the targets in
# FUZZ_TARGETS (default "gguf plan"), each on a seed corpus copied into a temporary folder:
#   gguf  the GGUF reader (and the writer on what the reader accepts), seeds: the shared models
#         (test/fuzz/gguf_reader_fuzz.cpp);
#   plan  the plan verifier and plan-dump (text, JSON, --nodes, --svg, --check-memory) on every plan it
#         accepts, seeds: scripts/fuzz-corpus/plan/ (an n_copies = 4 pipeline-parallel plan, an
#         n_copies = 1 plan with split inputs, a gemma2 plan with a SWA cache ring (schema 3:
#         n_ctx_swa, max_kv_swa, ne_swa, view_offset_swa), and regression-*.plan: inputs that once
#         failed; test/fuzz/plan_verify_fuzz.cpp).
# Fails (non-zero exit) on a crash, a leak, undefined behaviour, a timeout or a violated property;
# the reproducer is left in build-fuzz/.
#
# Needs clang-19 with libFuzzer (apt-get install clang-19 libclang-rt-19-dev), and flatc, CLI11,
# nlohmann-json and flatbuffers headers for the plan target. Builds into ./build-fuzz with direct
# compiler calls (no CMake).
#   FUZZ_SECONDS=300 scripts/fuzz.sh       # longer run
#   FUZZ_TARGETS=plan scripts/fuzz.sh      # one target
#   MODELS=/path/to/models scripts/fuzz.sh  # other GGUF seeds
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}
MODELS=${MODELS:-$ROOT/../shared/models}
CXX=${FUZZ_CXX:-$(command -v clang++-19 || command -v clang++ || true)}
if [ -z "$CXX" ]; then
  echo "fuzz.sh: clang++-19 not found (apt-get install clang-19 libclang-rt-19-dev)" >&2
  exit 2
fi

OUT=$ROOT/build-fuzz
mkdir -p "$OUT"
TARGETS=${FUZZ_TARGETS:-gguf plan}
n_targets=$(echo $TARGETS | wc -w)
PER_TARGET=$(( SECONDS_TO_RUN / n_targets ))
[ "$PER_TARGET" -ge 1 ] || PER_TARGET=1
CORPORA=()  # temporary seed folders, removed on exit
trap 'rm -rf "${CORPORA[@]}"' EXIT

# Rebuilds $1 from the sources $2.. (and the runtime headers) when one is newer than the binary.
needs_build() {
  local bin=$1; shift
  [ -x "$bin" ] || return 0
  for s in "$@" runtime/include/stowage/runtime/*.h; do [ "$s" -nt "$bin" ] && return 0; done
  return 1
}

fuzz_gguf() {
  local SRCS=(test/fuzz/gguf_reader_fuzz.cpp runtime/src/gguf/reader.cpp runtime/src/gguf/writer.cpp
        runtime/src/base/status.cpp runtime/src/base/ggml_types.cpp runtime/src/base/atomic_file.cpp)
  local BIN=$OUT/gguf_reader_fuzz
  if needs_build "$BIN" "${SRCS[@]}"; then
    echo "fuzz.sh: building $BIN with $CXX"
    "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I runtime/include "${SRCS[@]}" -o "$BIN"
  fi
  local CORPUS
  CORPUS=$(mktemp -d "${TMPDIR:-/tmp}/stowage-gguf-fuzz.XXXXXX")
  CORPORA+=("$CORPUS")
  local n_seeds=0
  if [ -d "$MODELS" ]; then
    while IFS= read -r -d '' f; do
      cp "$f" "$CORPUS/"
      n_seeds=$((n_seeds + 1))
    done < <(find "$MODELS" -name '*.gguf' -type f -print0)
  fi
  if [ $n_seeds = 0 ]; then
    # No shared models: seed with a minimal valid file (header of a v3 file without keys or tensors).
    printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$CORPUS/empty-v3.gguf"
    echo "fuzz.sh: $MODELS not found: seeding with a minimal file only" >&2
  fi
  echo "fuzz.sh: gguf: fuzzing for ${PER_TARGET}s on $n_seeds seed files"
  # -max_len: enough for the header of stories260K-sized models and the first part of the
  # large vocab arrays; longer inputs only slow the mutations down.
  (cd "$OUT" && "$BIN" "$CORPUS" -max_total_time="$PER_TARGET" -max_len=65536 -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -detect_leaks=1)
}

fuzz_plan() {
  command -v flatc > /dev/null || { echo "fuzz.sh: flatc not found (apt-get install flatbuffers-compiler)" >&2; return 2; }
  local GEN=$OUT/gen/stowage/plan
  mkdir -p "$GEN"
  if [ ! -f "$GEN/plan_generated.h" ] || [ runtime/schema/plan.fbs -nt "$GEN/plan_generated.h" ]; then
    flatc --cpp --scoped-enums -o "$GEN" runtime/schema/plan.fbs
  fi
  # The plan verifier (plan_file, plan_check, plan_graph: the graph checks bind TensorViews, hence
  # executor/tensor_view.cpp, op_params.cpp and the CPU/executor headers; the op parameters' decodes,
  # ggml_op_params.cpp; the ops' shape rules, ggml_op_shapes.cpp; the bounded file reader,
  # read_file.cpp) and plan-dump's -m model check (plan_model, the GGUF reader, identity, sliding
  # window); version.cpp: the --version strings of the tools' parser (llama_args.h), "unknown" here.
  local SRCS=(test/fuzz/plan_verify_fuzz.cpp runtime/src/plan/plan_file.cpp runtime/src/plan/plan_seal.cpp
        runtime/src/base/status.cpp runtime/src/base/ggml_types.cpp runtime/src/base/ggml_ops.cpp
        runtime/src/base/ggml_op_params.cpp runtime/src/base/ggml_op_shapes.cpp runtime/src/base/read_file.cpp
        runtime/src/base/atomic_file.cpp runtime/src/plan/plan_check.cpp runtime/src/plan/plan_graph.cpp
        runtime/src/plan/plan_model.cpp runtime/src/executor/tensor_view.cpp
        runtime/src/backends/cpu/op_params.cpp runtime/src/gguf/reader.cpp
        runtime/src/gguf/sliding_window.cpp runtime/src/base/model_identity.cpp tools/plan-dump/plan_dump.cpp
        tools/plan-dump/plan_svg.cpp runtime/src/version/version.cpp)
  local BIN=$OUT/plan_verify_fuzz
  if needs_build "$BIN" "${SRCS[@]}" runtime/schema/plan.fbs; then
    echo "fuzz.sh: building $BIN with $CXX"
    # plan_dump.cpp's main becomes plan_dump_main, called by the target on every accepted plan.
    "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I runtime/include -I "$OUT/gen" -I tools/common -I tools/plan-dump -I runtime/src/backends/cpu \
      -I runtime/src/executor \
      -Dmain=plan_dump_main "${SRCS[@]}" -lxxhash -o "$BIN"
  fi
  local CORPUS
  CORPUS=$(mktemp -d "${TMPDIR:-/tmp}/stowage-plan-fuzz.XXXXXX")
  CORPORA+=("$CORPUS")
  cp scripts/fuzz-corpus/plan/*.plan "$CORPUS/"
  echo "fuzz.sh: plan: fuzzing for ${PER_TARGET}s on $(ls "$CORPUS" | wc -l) seed plans"
  (cd "$OUT" && "$BIN" "$CORPUS" -max_total_time="$PER_TARGET" -max_len=131072 -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -detect_leaks=1)
}

for t in $TARGETS; do
  case $t in
    gguf) fuzz_gguf ;;
    plan) fuzz_plan ;;
    *) echo "fuzz.sh: unknown target '$t' in FUZZ_TARGETS (known: gguf plan)" >&2; exit 2 ;;
  esac
done
echo "fuzz.sh: no crash, leak or property violation in ${SECONDS_TO_RUN}s ($TARGETS)"
