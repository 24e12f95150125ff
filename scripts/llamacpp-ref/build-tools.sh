#!/usr/bin/env bash
# Builds llama.cpp's own command-line tools (llama-bench, llama-perplexity, llama-cli, llama-server,
# rpc-server) from the llama.cpp source bundled in a folder fetch.sh made (README.md): the npm
# packages ship libraries only.
# Usage: scripts/llamacpp-ref/build-tools.sh [--version V] [--jobs N] [--targets "T ..."] [DIR]
#   V: the node-llama-cpp version whose bundled source is built (default $NLC, else 3.22.1:
#      llama.cpp of 2026-09-28, release v0.5.0).
#   N: parallel compile jobs (default 2; the build runs under nice -n 10).
#   T: the targets (default: llama-bench llama-perplexity llama-cli llama-server ggml-rpc-server,
#      llama.cpp's CMake name of rpc-server; a link rpc-server -> ggml-rpc-server is made). They
#      are built in the order given, one target after the other.
#   DIR: the fetched folder (default ~/.cache/llamacpp-ref for 3.21.1, ~/.cache/llamacpp-ref-V
#      otherwise); run fetch.sh --version V first.
# The source (FETCH_HEAD of DIR/src) is extracted to DIR/build-tools/src and built in
# DIR/build-tools/build: Release, static libraries, GGML_RPC=ON, GGML_NATIVE=OFF with the CPU
# features of the npm package's zen4 variant when this machine has them (else haswell's),
# LLAMA_CURL=OFF, no OpenSSL, no web UI download, no tests or examples. The tools end up in
# DIR/build-tools/bin. Reruns only rebuild what changed. Takes about 20 minutes on 2 cores.
# The last line printed is
#   export REF_TOOLS_BIN=<DIR/build-tools/bin>
set -euo pipefail
NLC=${NLC:-3.22.1}
DIR=
JOBS=2
TARGETS="llama-bench llama-perplexity llama-cli llama-server ggml-rpc-server"
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || { echo "build-tools.sh: --version needs a value (e.g. 3.22.1)" >&2; exit 2; }
               NLC=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || { echo "build-tools.sh: --jobs needs a number" >&2; exit 2; }
            JOBS=$2; shift 2 ;;
    --targets) [ $# -ge 2 ] || { echo "build-tools.sh: --targets needs a list" >&2; exit 2; }
               TARGETS=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-tools.sh: unknown option '$1' (expected --version V, --jobs N, --targets LIST or a folder)" >&2; exit 2 ;;
    *) [ -z "$DIR" ] || { echo "build-tools.sh: one folder expected, got '$DIR' and '$1'" >&2; exit 2; }
       DIR=$1; shift ;;
  esac
done
[[ "$NLC" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-tools.sh: version '$NLC': expected MAJOR.MINOR.PATCH (e.g. 3.22.1)" >&2; exit 2; }
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "build-tools.sh: --jobs '$JOBS': expected a positive integer" >&2; exit 2; }
if [ -z "$DIR" ]; then
  if [ "$NLC" = 3.21.1 ]; then DIR=$HOME/.cache/llamacpp-ref; else DIR=$HOME/.cache/llamacpp-ref-$NLC; fi
fi
[ -f "$DIR/.done" ] || { echo "build-tools.sh: $DIR has no completed fetch (run scripts/llamacpp-ref/fetch.sh --version $NLC $DIR)" >&2; exit 1; }
git -C "$DIR/src" rev-parse -q --verify FETCH_HEAD >/dev/null ||
  { echo "build-tools.sh: $DIR/src has no FETCH_HEAD (the bundled llama.cpp source; rerun fetch.sh)" >&2; exit 1; }
BT=$DIR/build-tools
COMMIT=$(git -C "$DIR/src" rev-parse FETCH_HEAD)
if [ "$(cat "$BT/src/.commit" 2>/dev/null)" != "$COMMIT" ]; then
  rm -rf "$BT/src"
  mkdir -p "$BT/src"
  git -C "$DIR/src" archive FETCH_HEAD | tar x -C "$BT/src"
  echo "$COMMIT" > "$BT/src/.commit"
fi
# The CPU features of the npm package's variant for this machine (ggml/src/CMakeLists.txt's
# ggml_add_cpu_backend_variant lists): zen4 where the CPU has AVX512 VBMI, VNNI and BF16
# (/proc/cpuinfo spells them avx512vbmi, avx512_vnni, avx512_bf16).
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo || true)
CPU=(-DGGML_AVX=ON -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON)
if [[ " $FLAGS " == *" avx512f "* && " $FLAGS " == *" avx512vbmi "* && " $FLAGS " == *" avx512_vnni "* &&
      " $FLAGS " == *" avx512_bf16 "* ]]; then
  CPU+=(-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
fi
# The commit and build number llama-bench prints (build_commit, build_number) come from git, which
# the extracted tree has none of.
SHORT=$(git -C "$DIR/src" rev-parse --short=7 FETCH_HEAD)
cmake -S "$BT/src" -B "$BT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_RPC=ON -DGGML_NATIVE=OFF "${CPU[@]}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_COMMIT="$SHORT" >"$BT/configure.log" 2>&1 ||
  { tail -30 "$BT/configure.log" >&2; echo "build-tools.sh: configure failed ($BT/configure.log)" >&2; exit 1; }
for t in $TARGETS; do
  nice -n 10 cmake --build "$BT/build" -j"$JOBS" --target "$t"
  # llama.cpp puts every executable in the build's bin/ (its CMAKE_RUNTIME_OUTPUT_DIRECTORY).
  [ -x "$BT/build/bin/$t" ] || { echo "build-tools.sh: $BT/build/bin/$t was not built" >&2; exit 1; }
  mkdir -p "$BT/bin"
  ln -sf "../build/bin/$t" "$BT/bin/$t"
done
[ ! -x "$BT/bin/ggml-rpc-server" ] || ln -sf ggml-rpc-server "$BT/bin/rpc-server"
echo "export REF_TOOLS_BIN=$BT/bin   # llama.cpp $SHORT (node-llama-cpp $NLC): $TARGETS"
