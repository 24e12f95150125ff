#!/usr/bin/env bash
# bench-accel.sh: llama-bench style pp/tg speed of plans with and without the ACCEL (oneDNN) device
# (issue 7). For each model: one plan for this machine's devices (the CPU and, in a build with
# oneDNN, the ONEDNN ACCEL device the probe reports) and one CPU-only plan (--device none); both run
# with `stowage-run bench --plan`, alternating CPU / ACCEL runs ROUNDS times so that both see the
# same machine load, and the table gives the mean and spread of the per-round means.
#
# Usage: scripts/bench-accel.sh [MODEL.gguf ...]
#   (default: ~/.cache/stowage-bench/llama-0.85b-L16-f16.gguf)
# Environment: BUILD (build folder with plan-model and stowage-run, default build-accel),
#   THREADS (default: nproc), PP (512), TG (128), REPS (repetitions per bench run, 2),
#   ROUNDS (alternating rounds, 2), CTX (context of the plans, 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-accel}
THREADS=${THREADS:-$(nproc)}
PP=${PP:-512}
TG=${TG:-128}
REPS=${REPS:-2}
ROUNDS=${ROUNDS:-2}
CTX=${CTX:-1024}
PLAN_MODEL=$BUILD/bin/plan-model
RUN=$BUILD/bin/stowage-run
for t in "$PLAN_MODEL" "$RUN"; do
  [[ -x $t ]] || { echo "bench-accel: $t not found (build it: ninja -C $BUILD plan-model stowage-run)" >&2; exit 1; }
done
[[ $# -gt 0 ]] || set -- "$HOME/.cache/stowage-bench/llama-0.85b-L16-f16.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# mean and sample standard deviation of the numbers on stdin
stats() { awk '{ s += $1; q += $1 * $1; n++ } END { m = s / n; sd = n > 1 ? sqrt((q - n * m * m) / (n - 1)) : 0; if (sd != sd) sd = 0; printf "%.2f ± %.2f", m, sd }'; }

echo "| model | plan | graph splits (pp, tg) | threads | pp$PP t/s | tg$TG t/s |"
echo "| ----- | ---- | --------------------- | ------: | --------: | --------: |"
for model in "$@"; do
  [[ -f $model ]] || { echo "bench-accel: $model not found" >&2; exit 1; }
  name=$(basename "$model" .gguf)
  declare -A splits=()
  for cfg in cpu accel; do
    dev=()
    [[ $cfg == cpu ]] && dev=(--device none)
    if ! "$PLAN_MODEL" -m "$model" -c "$CTX" "${dev[@]}" -o "$tmp/$cfg.plan" > "$tmp/$cfg.log" 2>&1; then
      echo "bench-accel: plan-model failed for $model ($cfg):" >&2
      tail -3 "$tmp/$cfg.log" >&2
      exit 1
    fi
    splits[$cfg]=$(sed -n 's/.*graph splits = \([0-9]*\) (with bs=[0-9]*), \([0-9]*\) (with bs=1).*/\1, \2/p' "$tmp/$cfg.log")
  done
  : > "$tmp/cpu.pp"; : > "$tmp/cpu.tg"; : > "$tmp/accel.pp"; : > "$tmp/accel.tg"
  for ((r = 0; r < ROUNDS; r++)); do
    for cfg in cpu accel; do
      out=$("$RUN" bench --plan "$tmp/$cfg.plan" -m "$model" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" --json)
      sed -n 's/.*"pp_tps": \([0-9.]*\).*/\1/p' <<< "$out" >> "$tmp/$cfg.pp"
      sed -n 's/.*"tg_tps": \([0-9.]*\).*/\1/p' <<< "$out" >> "$tmp/$cfg.tg"
    done
  done
  for cfg in cpu accel; do
    label="CPU only (--device none)"
    [[ $cfg == accel ]] && label="this machine (CPU + ACCEL)"
    echo "| $name | $label | ${splits[$cfg]} | $THREADS | $(stats < "$tmp/$cfg.pp") | $(stats < "$tmp/$cfg.tg") |"
  done
  unset splits
done
