#!/usr/bin/env bash
# bench-accel.sh: llama-bench style pp/tg speed of plans with and without the ACCEL (oneDNN) device
# For each model: one plan for this machine's devices (the CPU and, in a build with
# oneDNN, the ONEDNN ACCEL device the probe reports) and one CPU-only plan (--device none); both run
# with `stowage-run bench --plan`, alternating CPU / ACCEL runs ROUNDS times so that both see the
# same machine load; the table gives the mean and spread of the per-round means and, for a noisy
# shared machine, the median over rounds of each configuration's speed / the CPU-only speed.
#
# Usage: scripts/bench-accel.sh [MODEL.gguf ...]
#   (default: ~/.cache/stowage-bench/llama-0.85b-L16-f16.gguf)
# Environment: BUILD (build folder with plan-model and stowage-run, default build-onednn),
#   BASELINE (optional second build folder, e.g. one of an earlier commit: its ACCEL plan runs in the
#   same alternating rounds as a third row, so a before/after comparison sees the same load),
#   THREADS (default: nproc), PP (512), TG (128), REPS (repetitions per bench run, 2),
#   ROUNDS (alternating rounds, 2), CTX (context of the plans, 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-onednn}
BASELINE=${BASELINE:-}
THREADS=${THREADS:-$(nproc)}
PP=${PP:-512}
TG=${TG:-128}
REPS=${REPS:-2}
ROUNDS=${ROUNDS:-2}
CTX=${CTX:-1024}
PLAN_MODEL=$BUILD/bin/plan-model
RUN=$BUILD/bin/stowage-run
cfgs=(cpu accel)
[[ -n $BASELINE ]] && cfgs+=(base)
tools() {  # plan-model and stowage-run of configuration $1
  if [[ $1 == base ]]; then echo "$BASELINE/bin/plan-model $BASELINE/bin/stowage-run"; else echo "$PLAN_MODEL $RUN"; fi
}
for cfg in "${cfgs[@]}"; do
  for t in $(tools "$cfg"); do
    [[ -x $t ]] || { echo "bench-accel: $t not found (build it: ninja -C $(dirname "$(dirname "$t")") plan-model stowage-run)" >&2; exit 1; }
  done
done
[[ $# -gt 0 ]] || set -- "$HOME/.cache/stowage-bench/llama-0.85b-L16-f16.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of the per-round ratios file1[i] / file2[i] (paired rounds: both saw the same machine load)
ratio() {
  paste "$1" "$2" | awk '{ print $1 / $2 }' | sort -g |
    awk '{ r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "%.2fx", m }'
}

# mean and sample standard deviation of the numbers on stdin
stats() { awk '{ s += $1; q += $1 * $1; n++ } END { m = s / n; sd = n > 1 ? sqrt((q - n * m * m) / (n - 1)) : 0; if (sd != sd) sd = 0; printf "%.2f ± %.2f", m, sd }'; }

echo "| model | plan | graph splits (pp, tg) | threads | pp$PP t/s | tg$TG t/s | pp, tg vs CPU only (median of per-round ratios) |"
echo "| ----- | ---- | --------------------- | ------: | --------: | --------: | ---------------------------------------------- |"
for model in "$@"; do
  [[ -f $model ]] || { echo "bench-accel: $model not found" >&2; exit 1; }
  name=$(basename "$model" .gguf)
  declare -A splits=()
  for cfg in "${cfgs[@]}"; do
    dev=()
    [[ $cfg == cpu ]] && dev=(--device none)
    read -r pm _ <<< "$(tools "$cfg")"
    if ! "$pm" -m "$model" -c "$CTX" "${dev[@]}" -o "$tmp/$cfg.plan" > "$tmp/$cfg.log" 2>&1; then
      echo "bench-accel: plan-model failed for $model ($cfg):" >&2
      tail -3 "$tmp/$cfg.log" >&2
      exit 1
    fi
    splits[$cfg]=$(sed -n 's/.*graph splits = \([0-9]*\) (with bs=[0-9]*), \([0-9]*\) (with bs=1).*/\1, \2/p' "$tmp/$cfg.log")
  done
  for cfg in "${cfgs[@]}"; do : > "$tmp/$cfg.pp"; : > "$tmp/$cfg.tg"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for cfg in "${cfgs[@]}"; do
      read -r _ run <<< "$(tools "$cfg")"
      out=$("$run" bench --plan "$tmp/$cfg.plan" -m "$model" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" --json)
      sed -n 's/.*"pp_tps": \([0-9.]*\).*/\1/p' <<< "$out" >> "$tmp/$cfg.pp"
      sed -n 's/.*"tg_tps": \([0-9.]*\).*/\1/p' <<< "$out" >> "$tmp/$cfg.tg"
    done
  done
  for cfg in "${cfgs[@]}"; do
    label="CPU only (--device none)"
    [[ $cfg == accel ]] && label="this machine (CPU + ACCEL)"
    [[ $cfg == base ]] && label="CPU + ACCEL, baseline $BASELINE"
    echo "| $name | $label | ${splits[$cfg]} | $THREADS | $(stats < "$tmp/$cfg.pp") | $(stats < "$tmp/$cfg.tg") |" \
         "$(ratio "$tmp/$cfg.pp" "$tmp/cpu.pp"), $(ratio "$tmp/$cfg.tg" "$tmp/cpu.tg") |"
  done
  unset splits
done
