"""Compares `stowage-run perplexity` output with a golden of make_golden.sh.

Usage: check_golden.py GOLDEN TYPE0_OUTPUT TYPE1_OUTPUT TOL [--expect-far]
  TYPE0_OUTPUT: stdout of `perplexity -f story.txt` ("[1]ppl,..." and "Final estimate: ...");
  TYPE1_OUTPUT: stdout of the same with --ppl-output-type 1 (mean NLL per chunk, 6 decimals).
  TOL: the largest |mean NLL - golden| allowed per chunk (nats); the printed per-chunk and final
  perplexities may differ by what that allows (ppl * TOL * 1.5) plus one unit of their last digit,
  the final error by 2.5e-5. TOL 0: every printed number equal (4 decimals of the perplexities, 5 of
  the error, 6 of the mean NLLs and their standard errors).
  --expect-far: instead, the largest mean NLL difference must exceed 100 * TOL (the check would
  catch a setting that moves the result).
Prints one line: "ok" or "far" (or what differs) and exits 0 when it holds, 1 otherwise.
"""
import json
import re
import sys

golden = json.load(open(sys.argv[1]))
type0 = open(sys.argv[2]).read()
type1 = open(sys.argv[3]).read()
tol = float(sys.argv[4])
expect_far = "--expect-far" in sys.argv[5:]

chunks = [float(v) for v in re.findall(r"\[\d+\](\d+\.\d+),", type0)]
final = re.search(r"Final estimate: PPL = (\d+\.\d+) \+/- (\d+\.\d+)", type0)
rows = [l.split() for l in type1.splitlines() if re.match(r"^ +\d+  \d", l)]
nll = [float(r[2]) for r in rows]
if len(nll) != len(golden["chunks_mean_nll"]) or len(chunks) != len(golden["chunks_ppl"]) or not final:
    print("chunk count differs: %d / %d lines, golden %d" % (len(chunks), len(nll), len(golden["chunks_ppl"])))
    sys.exit(1)
worst = max(abs(a - b) for a, b in zip(nll, golden["chunks_mean_nll"]))
if expect_far:
    ok = worst > 100 * tol
    print("far" if ok else "not far: max |mean NLL diff| %.6f <= %g" % (worst, 100 * tol))
    sys.exit(0 if ok else 1)
problems = []
if tol == 0:
    same = (chunks == golden["chunks_ppl"] and nll == golden["chunks_mean_nll"] and
            [float(r[3]) for r in rows] == golden["chunks_nll_stderr"] and
            float(final.group(1)) == golden["final_ppl"] and float(final.group(2)) == golden["final_err"])
    print("ok" if same else "differs: %s %s %s vs %s" % (chunks, nll, final.group(0), golden))
    sys.exit(0 if same else 1)
if worst > tol:
    problems.append("max |mean NLL diff| %.6f > %g (%s vs %s)" % (worst, tol, nll, golden["chunks_mean_nll"]))
# A perplexity follows its mean NLL: |d ppl| ~ ppl * |d nll|, plus the rounding of 4 decimals.
ppl_tol = lambda ppl: ppl * tol * 1.5 + 1.01e-4
if any(abs(a - b) > ppl_tol(b) for a, b in zip(chunks, golden["chunks_ppl"])):
    problems.append("chunk perplexities %s vs %s" % (chunks, golden["chunks_ppl"]))
if abs(float(final.group(1)) - golden["final_ppl"]) > ppl_tol(golden["final_ppl"]) or abs(float(final.group(2)) - golden["final_err"]) > 2.5e-5:
    problems.append("final %s +/- %s vs %s +/- %s" % (final.group(1), final.group(2), golden["final_ppl"], golden["final_err"]))
print("ok" if not problems else "; ".join(problems))
sys.exit(0 if not problems else 1)
