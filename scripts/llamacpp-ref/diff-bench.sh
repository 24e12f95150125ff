#!/usr/bin/env bash
# Runs `stowage-run bench` and llama.cpp's llama-bench with the same arguments on the same model and
# diffs their outputs in every format (-o md, csv, json, jsonl, sql) after masking what differs by
# nature: the timings (t/s, avg_ns, stddev_ns, avg_ts, stddev_ts, samples_ns, samples_ts), the
# build fields (build_commit, build_number, the md footer) and test_time. Everything else (columns,
# padding, field names and order, quoting, model description, sizes, settings) must be equal.
# Run by hand (not from scripts/test.sh): it needs llama-bench (build-tools.sh).
#
# Usage: scripts/llamacpp-ref/diff-bench.sh [MODEL] [-- BENCH ARGS...]
#   MODEL: default ../shared/models/stories260K.gguf; BENCH ARGS: default several argument sets
#   (lists of -p/-n/-t/-fa/-d/-b/-ub, -pg); each set is run in every format.
# Env: REF_TOOLS_BIN (default ~/.cache/llamacpp-ref-3.22.1/build-tools/bin), BUILD (default build).
# Expected difference, reported and then masked: a Stowage build with oneDNN has an ACCEL device
# that llama.cpp's CPU build lacks (llama.cpp's BLAS build would show BLAS the same way), so
# Stowage's backends field says ONEDNN (llama.cpp: CPU) and its cpu_info starts with oneDNN's
# description.
# Exit status 0 when every format of every set matches, 1 otherwise (the diffs are printed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${REF_TOOLS_BIN:-$HOME/.cache/llamacpp-ref-3.22.1/build-tools/bin}
BUILD=${BUILD:-$ROOT/build}
MODEL=$ROOT/../shared/models/stories260K.gguf
if [ $# -gt 0 ] && [ "$1" != "--" ]; then MODEL=$1; shift; fi
[ $# -eq 0 ] || { [ "$1" = "--" ] && shift; }
[ -x "$REF/llama-bench" ] || { echo "diff-bench: $REF/llama-bench not found (run scripts/llamacpp-ref/build-tools.sh)" >&2; exit 1; }
[ -x "$BUILD/bin/stowage-run" ] || { echo "diff-bench: $BUILD/bin/stowage-run not found (set BUILD)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "diff-bench: model $MODEL not found" >&2; exit 1; }
SETS=()
if [ $# -gt 0 ]; then
  SETS+=("$*")
else
  SETS+=("-p 64 -n 16 -r 2"
         "-p 16,32 -n 4 -d 0,24 -r 1"
         "-p 16 -n 4 -fa 0,1 -t 1,2 -r 1"
         "-p 32 -n 0 -b 256 -ub 16 -r 1"
         "-p 0 -n 0 -pg 16,4 -r 1"
         "-p 8 -n 2 -ngl 0 -fa 1 -r 1")
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
for set in "${SETS[@]}"; do
  for fmt in md csv json jsonl sql; do
    # shellcheck disable=SC2086
    "$BUILD/bin/stowage-run" bench -m "$MODEL" $set -o "$fmt" > "$TMP/stowage.$fmt" 2> "$TMP/stowage.err" ||
      { echo "diff-bench: stowage-run bench $set -o $fmt failed:" >&2; cat "$TMP/stowage.err" >&2; status=1; continue; }
    # shellcheck disable=SC2086
    "$REF/llama-bench" -m "$MODEL" $set -o "$fmt" > "$TMP/llama.$fmt" 2> "$TMP/llama.err" ||
      { echo "diff-bench: llama-bench $set -o $fmt failed:" >&2; cat "$TMP/llama.err" >&2; status=1; continue; }
    python3 - "$fmt" "$TMP/stowage.$fmt" "$TMP/llama.$fmt" "$TMP/stowage.norm" "$TMP/llama.norm" > "$TMP/notes" <<'EOF'
import csv, io, re, sys
fmt, src_s, src_l, out_s, out_l = sys.argv[1:]
MASK = {"build_commit", "build_number", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"}
notes = set()

def onednn(fields):
    # Stowage's oneDNN ACCEL device (see the header): masked to llama.cpp's CPU-only values.
    if fields.get("backends") == "ONEDNN":
        notes.add("backends ONEDNN (Stowage's oneDNN device) read as CPU")
        fields["backends"] = "CPU"
    if fields.get("cpu_info", "").startswith("oneDNN "):
        notes.add("cpu_info's oneDNN description dropped")
        fields["cpu_info"] = fields["cpu_info"].split(", ", 1)[-1]

def norm(text, stowage):
    if fmt == "md":
        out = []
        for line in text.splitlines():
            if line.startswith("build: "):
                line = "build: X"
            elif line.startswith("|") and not line.startswith("| ---") and not line.startswith("| model"):
                cells = line.split("|")
                cells[-2] = " T/S "
                if stowage and " ONEDNN " in line:
                    notes.add("backend ONEDNN (Stowage's oneDNN device) read as CPU")
                    cells = [c.replace("ONEDNN    ", "CPU       ") for c in cells]
                line = "|".join(cells)
            out.append(line)
        return "\n".join(out) + "\n"
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        head, out = rows[0], [",".join(rows[0])]
        for r in rows[1:]:
            f = dict(zip(head, r))
            if stowage:
                onednn(f)
            out.append(",".join('"%s"' % ("X" if k in MASK else f[k].replace('"', '""')) for k in head))
        return "\n".join(out) + "\n"
    if fmt == "sql":
        out = []
        fields = []
        for line in text.splitlines():
            m = re.match(r"INSERT INTO llama_bench \((.*)\) VALUES \('(.*)'\);$", line)
            if not m:
                out.append(line)
                continue
            names = m.group(1).split(", ")
            f = dict(zip(names, m.group(2).split("', '")))
            if stowage:
                onednn(f)
            out.append("INSERT INTO llama_bench (%s) VALUES (%s);" % (m.group(1), ", ".join(
                "'%s'" % ("X" if k in MASK else f[k]) for k in names)))
        return "\n".join(out) + "\n"
    # json / jsonl: the text as printed, values of the masked fields replaced
    t = re.sub(r'"(build_commit|test_time)": "[^"]*"', r'"\1": X', text)
    t = re.sub(r'"(build_number|avg_ns|stddev_ns|avg_ts|stddev_ts)": [-0-9.e+]+', r'"\1": X', t)
    t = re.sub(r'"(samples_ns|samples_ts)": \[[^\]]*\]', r'"\1": X', t)
    if stowage:
        if '"backends": "ONEDNN"' in t:
            notes.add("backends ONEDNN (Stowage's oneDNN device) read as CPU")
        t = t.replace('"backends": "ONEDNN"', '"backends": "CPU"')
        t2 = re.sub(r'"cpu_info": "oneDNN [^"]*?, ', '"cpu_info": "', t)
        if t2 != t:
            notes.add("cpu_info's oneDNN description dropped")
        t = t2
    return t

open(out_s, "w").write(norm(open(src_s).read(), True))
open(out_l, "w").write(norm(open(src_l).read(), False))
for n in sorted(notes):
    print("  (expected: %s)" % n)
EOF
    if diff -u "$TMP/llama.norm" "$TMP/stowage.norm" > "$TMP/diff"; then
      echo "same: bench $set -o $fmt"
      cat "$TMP/notes"
    else
      echo "DIFFERENT: bench $set -o $fmt (- llama-bench, + stowage-run)"
      cat "$TMP/notes" "$TMP/diff"
      status=1
    fi
  done
done
exit $status
