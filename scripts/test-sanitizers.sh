#!/usr/bin/env bash
# Builds the runtime, tools and unit tests with AddressSanitizer + UndefinedBehaviorSanitizer into
# ./build-asan (the default compiler, gcc on Debian: the CPU backend needs OpenMP, which clang-19
# lacks without libomp-19-dev; set CC/CXX to choose another; MLIR, oneDNN and CUDA off) and runs
# ctest there (GoogleTest + lit). Any sanitizer report fails the run: UBSan does not recover
# (-fno-sanitize-recover, top-level CMakeLists.txt) and ASan aborts on the first error.
#
#   scripts/test-sanitizers.sh                  # everything
#   SAN_TARGETS="gguf_reader_test gguf_malformed_test" SAN_TESTS='^Gguf' scripts/test-sanitizers.sh
#                                               # a subset: ninja targets and a ctest -R regex
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOWAGE_SANITIZE=ON \
  -DSTOWAGE_ENABLE_MLIR=OFF -DSTOWAGE_ENABLE_CUDA=OFF -DSTOWAGE_ENABLE_ONEDNN=OFF >/dev/null
# shellcheck disable=SC2086  # SAN_TARGETS is a list of target names
cmake --build build-asan -j "$JOBS" ${SAN_TARGETS:+--target $SAN_TARGETS}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j "$JOBS" ${SAN_TESTS:+-R "$SAN_TESTS"}
