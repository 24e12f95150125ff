#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from what clang-format-19 makes of it under the
# checked-in .clang-format files (Google, 110 columns; LLVM, 100 columns in compiler/ and dialects/).
# The version is pinned: another clang-format major formats some constructs differently.
# Fix with: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-19}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check-format: $CLANG_FORMAT not found (scripts/install-deps.sh installs clang-format-19)" >&2
  exit 1
fi
# unicode_data.inc is generated (runtime/src/tokenizer/gen_unicode_data.py).
mapfile -t files < <(git ls-files -- '*.cpp' '*.cc' '*.c' '*.h' '*.hpp' '*.inc' '*.cu' '*.cuh' |
  grep -v 'runtime/src/tokenizer/unicode_data.inc')
if [ "${1:-}" = --fix ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$CLANG_FORMAT" -i
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not clang-format-19 clean (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files clean"
