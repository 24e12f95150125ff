#!/bin/sh
# import_plan_loop.sh OUTDIR GGUF...: for each model and -ngl 0 / 99 on the devices h200,cpu,
# plans the model with plan-model -O0 (-c 256 -fa off: the planner's graphs, the default --llamacpp-compat
# as stowage-opt's import) and imports the plan with
# stowage-opt --import-plan (the dialect verifiers check every node); the imported IR must equal the
# placed GGUF import of the same configuration (stowage-opt --import-gguf --place-devices), apart
# from the GGUF import's stowage.import record on the module. The -O2 plan (the compiler's
# rewrites) must import too. Prints one line per configuration; exits non-zero at the first
# failure, naming it.
set -u
out=$1
shift
for m in "$@"; do
  for ngl in 0 99; do
    name="$(basename "$m") -ngl $ngl"
    plan-model -m "$m" --device h200,cpu --free CPU=16GiB -ngl $ngl -c 256 -fa off -O0 -o "$out.plan" >/dev/null ||
      { echo "FAIL plan-model: $name"; exit 1; }
    plan-model -m "$m" --device h200,cpu --free CPU=16GiB -ngl $ngl -c 256 -O2 -o "$out.O2.plan" >/dev/null &&
      stowage-opt --import-plan "$out.O2.plan" -o /dev/null || { echo "FAIL --import-plan of the -O2 plan: $name"; exit 1; }
    stowage-opt --import-plan "$out.plan" -o "$out.plan.mlir" ||
      { echo "FAIL --import-plan: $name"; exit 1; }
    stowage-opt --import-gguf "$m" --gguf-n-ctx 256 --place-devices h200,cpu --place-ngl $ngl \
      -o "$out.gguf.mlir" 2>/dev/null || { echo "FAIL --import-gguf: $name"; exit 1; }
    sed -e '1s/, stowage.import = {[^}]*}//' "$out.gguf.mlir" | cmp -s - "$out.plan.mlir" ||
      { echo "FAIL the plan's IR differs from the placed GGUF import: $name"; exit 1; }
    echo "OK $name: $(grep -c 'place.split' "$out.plan.mlir") splits"
  done
done
