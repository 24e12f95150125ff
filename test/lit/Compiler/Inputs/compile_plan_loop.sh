#!/bin/sh
# compile_plan_loop.sh OUTDIR GGUF...: for each model, on h200,cpu at -ngl 0 / 4 / 99 and on
# h200,h200,cpu at -ngl 99 (pipeline parallelism, n_copies 4), plans the model with plan-model -O1
# (the compiler stage without rewriting passes: import, export, memory planned again, verified) and
# with -O0 (the planner's graphs); the two plans must be equal in every field plan-dump --json prints
# (nodes, splits, split inputs and their copies, buffers, offsets) except the recorded command line
# and the checksum over it. The -O2 plan (every rewriting pass) must pass the runtime's
# verifier (plan-dump). Prints one line per configuration; exits non-zero at the first failure.
set -u
out=$1
shift
for m in "$@"; do
  for cfg in "h200,cpu 0" "h200,cpu 4" "h200,cpu 99" "h200,h200,cpu 99"; do
    set -- $cfg
    name="$(basename "$m") --device $1 -ngl $2"
    for o in 0 1; do
      plan-model -m "$m" --device $1 --free CPU=16GiB -ngl $2 -c 256 -O$o -o "$out.O$o.plan" >/dev/null ||
        { echo "FAIL plan-model -O$o: $name"; exit 1; }
      plan-dump --json "$out.O$o.plan" | grep -v '"flags": \|"content_xxh64": ' > "$out.O$o.json" ||
        { echo "FAIL plan-dump -O$o: $name"; exit 1; }
    done
    cmp -s "$out.O0.json" "$out.O1.json" || { echo "FAIL the -O1 plan differs from -O0's: $name"; exit 1; }
    plan-model -m "$m" --device $1 --free CPU=16GiB -ngl $2 -c 256 -O2 -o "$out.O2.plan" >/dev/null &&
      plan-dump "$out.O2.plan" > /dev/null || { echo "FAIL the -O2 plan: $name"; exit 1; }
    echo "OK $name: $(grep -c '"node_begin"' "$out.O1.json") splits"
  done
done
