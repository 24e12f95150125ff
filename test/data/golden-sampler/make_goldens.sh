#!/usr/bin/env bash
# Reference sampler chains from llama.cpp 2026-09-28 (node-llama-cpp 3.22.1's library; see
# ../../../../shared/tools/llamacpp-ref/README.md): builds refsampler.cpp against it
# (../build-llamacpp-ref-tool.sh) and writes chains.txt, which sampler_chain_test
# (test/unit/runtime) compares SamplerChain with.
# Usage: make_goldens.sh   (rerun: it rewrites chains.txt byte for byte)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
REF_BACKEND_DIR=$("$HERE/../build-llamacpp-ref-tool.sh" "$HERE/refsampler.cpp" "$TMP/refsampler")
export REF_BACKEND_DIR
"$TMP/refsampler" > "$HERE/chains.txt"
