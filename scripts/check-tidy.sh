#!/usr/bin/env bash
# Runs clang-tidy-19 with the checked-in .clang-tidy over every C++ source of the build in ./build
# (its compile_commands.json; CUDA .cu files and generated sources are left out) and fails on any
# finding. Slow (about 15 min on 2 cores), so it is not part of scripts/test.sh; run it before a
# change that touches many files. FILES="a.cpp b.cpp" checks only those.
set -euo pipefail
cd "$(dirname "$0")/.."
TIDY=${CLANG_TIDY:-clang-tidy-19}
RUN=${RUN_CLANG_TIDY:-run-clang-tidy-19}
for t in "$TIDY" "$RUN"; do
  command -v "$t" >/dev/null || { echo "check-tidy: $t not found (apt-get install clang-tidy-19 libomp-19-dev)" >&2; exit 1; }
done
# The build compiles with GCC; clang needs its own OpenMP header (omp.h) for the -fopenmp sources.
[ -f /usr/lib/llvm-19/lib/clang/19/include/omp.h ] ||
  { echo "check-tidy: clang-19's omp.h not found (apt-get install libomp-19-dev)" >&2; exit 1; }
[ -f build/compile_commands.json ] || { echo "check-tidy: build/compile_commands.json missing (scripts/build.sh first)" >&2; exit 1; }
root=$(pwd)
if [ -n "${FILES:-}" ]; then
  read -r -a files <<<"$FILES"
else
  mapfile -t files < <(python3 - "$root" <<'PY'
import json, sys
root = sys.argv[1]
seen = []
for e in json.load(open(root + "/build/compile_commands.json")):
    f = e["file"]
    if f.startswith(root + "/build/") or f.endswith(".cu") or f in seen:
        continue
    seen.append(f)
print("\n".join(seen))
PY
)
fi
"$RUN" -clang-tidy-binary "$(command -v "$TIDY")" -p build -quiet -j "${JOBS:-$(nproc)}" "${files[@]}"
echo "check-tidy: ${#files[@]} files clean"
