#!/usr/bin/env bash
# Fetches a reference llama.cpp (the prebuilt CPU libraries of the npm packages node-llama-cpp and
# @node-llama-cpp/linux-x64, their headers from the llama.cpp source bundled in node-llama-cpp) and
# builds the project's reference tools against it: refdump and quantize (README.md).
# Usage: scripts/llamacpp-ref/fetch.sh [--version V] [DIR]
#   V: the node-llama-cpp version (default $NLC, else 3.21.1: llama.cpp of Sep 2026, the existing
#      goldens' reference; 3.22.1: llama.cpp of 2026-09-28, release v0.5.0).
#   DIR: where it goes (default ~/.cache/llamacpp-ref for 3.21.1, ~/.cache/llamacpp-ref-V for others;
#      the layout of ../shared/tools/llamacpp-ref/fetch.sh, so a folder fetched by either serves both).
# Downloads only when DIR has no completed fetch (DIR/.done); rebuilds the tools when their sources
# are newer. The tools go into DIR/stowage/ (refdump, quantize). The last line printed is
#   export REF_BACKEND_DIR=<the CPU backends' folder> REF_TOOLS=<DIR/stowage>   # ...
# (scripts read REF_BACKEND_DIR from it).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NLC=${NLC:-3.21.1}
DIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || { echo "fetch.sh: --version needs a value (e.g. 3.22.1)" >&2; exit 2; }
               NLC=$2; shift 2 ;;
    --version=*) NLC=${1#--version=}; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fetch.sh: unknown option '$1' (expected --version V or a folder)" >&2; exit 2 ;;
    *) [ -z "$DIR" ] || { echo "fetch.sh: one folder expected, got '$DIR' and '$1'" >&2; exit 2; }
       DIR=$1; shift ;;
  esac
done
[[ "$NLC" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "fetch.sh: version '$NLC': expected MAJOR.MINOR.PATCH (e.g. 3.22.1)" >&2; exit 2; }
if [ -z "$DIR" ]; then
  if [ "$NLC" = 3.21.1 ]; then DIR=$HOME/.cache/llamacpp-ref; else DIR=$HOME/.cache/llamacpp-ref-$NLC; fi
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ ! -f "$DIR/.done" ]; then
  (
    cd "$DIR"
    npm pack --silent "node-llama-cpp@$NLC" "@node-llama-cpp/linux-x64@$NLC" >/dev/null
    tar xzf "node-llama-cpp-$NLC.tgz" package/llama/gitRelease.bundle
    rm -rf src && git init -q src && git -C src fetch -q "$DIR/package/llama/gitRelease.bundle" HEAD
    git -C src archive FETCH_HEAD include ggml/include | tar x
    mkdir -p bin && tar xzf "node-llama-cpp-linux-x64-$NLC.tgz" -C bin
    touch .done
  )
fi
# A folder fetched for another version would silently give the wrong reference.
if [ -f "$DIR/bin/package/package.json" ]; then
  have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$DIR/bin/package/package.json" | head -1)
  [ "$have" = "$NLC" ] || { echo "fetch.sh: $DIR holds node-llama-cpp $have, not $NLC (pick another folder)" >&2; exit 1; }
fi
B=$DIR/bin/package/bins/linux-x64
# Library names carry the llama.cpp release (libllama.v0.4.0.so in 3.21.1, v0.5.0 in 3.22.1).
LLAMA=$(cd "$B" && ls libllama.v*.so | head -1)
GGML=$(cd "$B" && ls libggml.v*.so | head -1)
T=$DIR/stowage
mkdir -p "$T/include"
# llama-ext.h (llama_get_memory_breakdown, for refdump --no-alloc) is not among the public headers.
[ -f "$T/include/llama-ext.h" ] || git -C "$DIR/src" show FETCH_HEAD:src/llama-ext.h > "$T/include/llama-ext.h"
LIBS=(-L"$B" -l:"$LLAMA" -l:"$GGML" -l:libggml-base.so -Wl,-rpath,"$B")
INC=(-I"$T/include" -I"$DIR/include" -I"$DIR/ggml/include")
DEFS=(-DREF_DEFAULT_BACKEND_DIR="\"$B\"" -DREF_NLC_VERSION="\"$NLC\"")
for tool in refdump quantize; do
  if [ ! -x "$T/$tool" ] || [ "$HERE/$tool.cpp" -nt "$T/$tool" ] || [ "$HERE/ref_common.h" -nt "$T/$tool" ]; then
    g++ -O1 -std=c++17 -Wall "$HERE/$tool.cpp" -o "$T/$tool.tmp" "${INC[@]}" "${DEFS[@]}" "${LIBS[@]}"
    mv "$T/$tool.tmp" "$T/$tool"
  fi
done
echo "export REF_BACKEND_DIR=$B REF_TOOLS=$T   # node-llama-cpp $NLC; then: \$REF_TOOLS/refdump --help, \$REF_TOOLS/quantize --help"
