#!/usr/bin/env bash
# The whole test suite, on the build in ./build:
#   0. the format check: every C++/CUDA source is clang-format-19 clean (scripts/check-format.sh);
#   1. ctest: every GoogleTest binary and the lit suite (FileCheck on the tools' output);
#   2. the GGUF container, runtime, tokenizer and CPU kernel suites again under ASan+UBSan
#      (build-asan, scripts/test-sanitizers.sh);
#   3. 60 s of libFuzzer shared by the GGUF reader and the plan verifier + plan-dump (scripts/fuzz.sh, clang-19).
# SKIP_SANITIZERS=1 / SKIP_FUZZ=1 leave out steps 2 / 3 (for quick local runs).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
scripts/check-format.sh
ctest --test-dir build --output-on-failure -j "$JOBS"
if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
  SAN_TARGETS="gguf_reader_test gguf_malformed_test gguf_writer_test atomic_file_test session_test golden_logits_test tokenizer_test sampler_test cpu_ops_test cpu_quant_test cpu_repack_test cpu_flash_attn_test cpu_simd_test batch_invariance_test" \
  SAN_TESTS='^(Gguf|AtomicFile|Session|Models/GoldenLogits|FlashAttn/GoldenLogits|Tokeniz|Spm|Bpe|Wpm|FromGguf|PreTokenizer|LlamaCppDifferential|Sampler|Cpu|BatchInvariance)' \
    scripts/test-sanitizers.sh
fi
if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh
fi
echo "test.sh: all suites passed"
