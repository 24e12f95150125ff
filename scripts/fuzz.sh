#!/usr/bin/env bash
# Fuzzes the GGUF reader (and the writer on what the reader accepts) with libFuzzer for
# FUZZ_SECONDS (default 60) on a seed corpus of the shared models, copied into a temporary folder.
# Fails (non-zero exit) on a crash, a leak, undefined behaviour, a timeout or a violated property
# (see test/fuzz/gguf_reader_fuzz.cpp); the reproducer is left in build-fuzz/.
#
# Needs clang-19 with libFuzzer (apt-get install clang-19 libclang-rt-19-dev). Builds into
# ./build-fuzz with a direct compiler call (no CMake): the reader has no dependencies.
#   FUZZ_SECONDS=300 scripts/fuzz.sh       # longer run
#   MODELS=/path/to/models scripts/fuzz.sh  # other seeds
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
SRCS=(test/fuzz/gguf_reader_fuzz.cpp runtime/src/gguf/reader.cpp runtime/src/gguf/writer.cpp
      runtime/src/base/status.cpp runtime/src/base/ggml_types.cpp)
BIN=$OUT/gguf_reader_fuzz
# Rebuild only when a source is newer than the binary.
rebuild=0
[ -x "$BIN" ] || rebuild=1
for s in "${SRCS[@]}" runtime/include/stowage/runtime/*.h; do [ "$s" -nt "$BIN" ] && rebuild=1; done
if [ $rebuild = 1 ]; then
  echo "fuzz.sh: building $BIN with $CXX"
  "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I runtime/include "${SRCS[@]}" -o "$BIN"
fi

CORPUS=$(mktemp -d "${TMPDIR:-/tmp}/stowage-gguf-fuzz.XXXXXX")
trap 'rm -rf "$CORPUS"' EXIT
n_seeds=0
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
echo "fuzz.sh: fuzzing for ${SECONDS_TO_RUN}s on $n_seeds seed files"
cd "$OUT"
# -max_len: enough for the header of stories260K-sized models and the first part of the
# large vocab arrays; longer inputs only slow the mutations down.
"$BIN" "$CORPUS" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=20 -rss_limit_mb=2560 \
  -print_final_stats=1 -detect_leaks=1
echo "fuzz.sh: no crash, leak or property violation in ${SECONDS_TO_RUN}s"
