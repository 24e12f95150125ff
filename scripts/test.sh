#!/usr/bin/env bash
# The whole test suite: GoogleTest + lit through ctest, on the build in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}"
