#!/usr/bin/env bash
# Regenerates the perplexity goldens: llama.cpp's own llama-perplexity (llama.cpp 3.22.1, built by
# scripts/llamacpp-ref/build-tools.sh) on story.txt with ../shared/models/stories260K.gguf at its
# defaults (n_ctx 512, n_batch 2048: four chunks per batch, no escape processing of the text) and
# 2 threads, with flash attention off and on (llama-perplexity's default, auto, is on for the CPU),
# and off with an F32 KV cache (-ctk f32 -ctv f32: where Stowage agrees in every printed digit).
# Each golden is JSON: the per-chunk "[i]ppl" values, the --ppl-output-type 1 columns (mean
# negative log-likelihood and its standard error, 6 decimals) and the final estimate.
# test/lit/tools/stowage-run/perplexity-golden.test checks stowage-run perplexity against them.
# Usage: test/data/golden-perplexity/make_golden.sh   (env REF_TOOLS_BIN: the tools' folder)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REF=${REF_TOOLS_BIN:-$HOME/.cache/llamacpp-ref-3.22.1/build-tools/bin}
MODEL=${MODEL:-$HERE/../../../../shared/models/stories260K.gguf}
[ -x "$REF/llama-perplexity" ] || { echo "make_golden: $REF/llama-perplexity not found (run scripts/llamacpp-ref/build-tools.sh)" >&2; exit 1; }
for name in fa-off fa-on fa-off-f32cache; do
  out=$HERE/stories260K-$name.json
  args="-fa ${name:3:3}"
  args=${args% }
  case $name in *f32cache) args="-fa off -ctk f32 -ctv f32" ;; esac
  # llama.cpp's logger thread can lose the last lines at exit on a loaded machine: run again until
  # the output is complete (the final estimate, one type-1 line per chunk).
  for try in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    "$REF/llama-perplexity" -m "$MODEL" -f "$HERE/story.txt" -t 2 $args > "$out.stdout" 2> "$out.stderr"
    # shellcheck disable=SC2086
    "$REF/llama-perplexity" -m "$MODEL" -f "$HERE/story.txt" -t 2 $args --ppl-output-type 1 > "$out.type1" 2> /dev/null
    n=$(grep -o '\[[0-9]*\]' "$out.stdout" | wc -l)
    if grep -q 'Final estimate' "$out.stderr" && [ "$n" -gt 1 ] && [ "$(grep -c '^ *[0-9]*  [0-9]' "$out.type1")" = "$n" ]; then
      break
    fi
    [ "$try" -lt 5 ] || { echo "make_golden: llama-perplexity $args printed incomplete output 5 times" >&2; exit 1; }
  done
  python3 - "$out" "$args" "$("$REF/llama-perplexity" --version 2>&1 | sed -n 's/^version: //p' | head -1)" <<'PY'
import json, re, sys
out, args, version = sys.argv[1:]
stdout = open(out + ".stdout").read()
stderr = open(out + ".stderr").read()
chunks = [float(v) for v in re.findall(r"\[\d+\](\d+\.\d+),", stdout)]
final = re.search(r"Final estimate: PPL = (\d+\.\d+) \+/- (\d+\.\d+)", stderr)
rows = [l.split() for l in open(out + ".type1") if re.match(r"^ +\d+  \d", l)]
golden = {
    "reference": "llama.cpp llama-perplexity " + version + " (node-llama-cpp 3.22.1 source, build-tools.sh)",
    "command": "llama-perplexity -m stories260K.gguf -f story.txt -t 2 " + args,
    "chunks_ppl": chunks,
    "chunks_mean_nll": [float(r[2]) for r in rows],
    "chunks_nll_stderr": [float(r[3]) for r in rows],
    "final_ppl": float(final.group(1)),
    "final_err": float(final.group(2)),
}
assert len(chunks) == len(rows) > 1, (chunks, rows)
open(out, "w").write(json.dumps(golden, indent=1) + "\n")
PY
  rm -f "$out.stdout" "$out.stderr" "$out.type1"
  echo "wrote $out"
done
