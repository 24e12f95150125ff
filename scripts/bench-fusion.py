#!/usr/bin/env python3
"""Benchmark (run on demand, not part of the tests): the compiler's fusions against the planner's graphs.

Per model, plan-model writes two plans for this machine (-O0: the planner's graphs; -O2 by default:
the compiler's rewriting passes; --levels changes the pair), then ROUNDS rounds run pp and tg of both
plans with `stowage-run --plan P bench -r 1 --json` (one process per run, its warm-up included), the
order swapped every round (A B, B A, A B, ...). Each run's share of the CPUs used by other processes
meanwhile is measured as scripts/bench-vs-llamacpp.sh does (tools/bench/bench_vs_llamacpp.py
run_measured); runs above --max-foreign are listed and left out of the figures (others' builds on a
shared 2-core machine slow a 2-thread run by up to 10x); before each run it waits (--max-wait) for
a quiet second. Prints per model and test the mean, the
spread (sd, min-max) and the count of both levels and the ratio of their means.

Usage: scripts/bench-fusion.py [--rounds 5] [--threads 2] [--levels 0,2] [--n-prompt 512]
       [--n-gen 128] [--build build] MODEL.gguf ...
With --count, also per ubatch of each test (one token for tg): the nodes run (`bench --profile`:
the calls of every op) and, where `perf probe` has put uprobes on libgomp (--count prints the
commands), the thread teams (GOMP_parallel*: one fork / join each) and barriers (a team's join plus
each worksharing loop's or explicit barrier, GOMP_loop_end / GOMP_barrier, called by every thread),
from the difference of two runs of different lengths.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "bench"))
from bench_vs_llamacpp import CLK_TCK, NCPU, proc_stat, run_measured  # noqa: E402  (one copy)


def wait_idle(max_foreign, max_wait):
    """Waits (at most max_wait seconds) for a second in which other processes used at most
    max_foreign of the CPUs, so that a run starts on a quiet machine when there is one."""
    waited = 0
    while waited < max_wait:
        b0, _ = proc_stat()
        time.sleep(1)
        b1, _ = proc_stat()
        waited += 1
        if (b1 - b0) / CLK_TCK / NCPU <= max_foreign:
            return


GOMP_PROBES = ["GOMP_parallel", "GOMP_parallel_loop_dynamic", "GOMP_parallel_loop_guided",
               "GOMP_parallel_loop_static", "GOMP_parallel_loop_runtime", "GOMP_loop_end", "GOMP_barrier"]


def libgomp_probes():
    """The uprobes on libgomp that `perf probe` lists (probe_libgomp:NAME), or [] (with a hint)."""
    try:
        listed = subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout
    except OSError:
        listed = ""
    have = [f for f in GOMP_PROBES if f"probe_libgomp:{f} " in listed]
    if not have:
        lib = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
        print("bench-fusion: no libgomp uprobes; as root: " +
              "; ".join(f"perf probe -x {lib} {f}" for f in GOMP_PROBES), file=sys.stderr)
    return have


def count_per_ubatch(a, plan, model, test, probes):
    """(nodes, teams, barriers) per ubatch of `test` (pp or tg) of one plan; None where unknown."""
    def run(reps_or_gen):
        p, n, r = (a.n_prompt, 0, reps_or_gen) if test == "pp" else (0, reps_or_gen, 1)
        cmd = [a.build + "/bin/stowage-run", "--plan", plan, "-m", model, "bench", "-t", str(a.threads), "-p",
               str(p), "-n", str(n), "-r", str(r), "--no-warmup"]
        return cmd, (r if test == "pp" else n)

    # The profile prints calls per token with two decimals: a 2-token prompt (the pp graph, as at
    # any n_tokens > 1) keeps them exact.
    cmd, _ = run(1 if test == "pp" else 8)
    if test == "pp":
        cmd[cmd.index("-p") + 1] = "2"
    prof = subprocess.run(cmd + ["--profile"], capture_output=True, text=True, check=True).stdout
    rows = [l.split("|") for l in prof.splitlines() if l.startswith("| ") and l.count("|") == 6]
    calls = {r[1].strip(): float(r[3]) for r in rows if r[3].strip().replace(".", "").isdigit()}
    nodes = sum(v for k, v in calls.items() if not k.startswith("(")) / calls["(ubatch)"] if calls else None
    if not probes:
        return nodes, None, None
    counts = []
    for length in ((1, 3) if test == "pp" else (32, 96)):
        cmd, units = run(length)
        out = subprocess.run(["perf", "stat", "-x,", "-e", ",".join("probe_libgomp:" + f for f in probes)] + cmd,
                             capture_output=True, text=True, check=True).stderr
        c = {l.split(",")[2].split(":")[1]: int(l.split(",")[0]) for l in out.splitlines() if "probe_libgomp:" in l}
        counts.append((units, c))
    (u0, c0), (u1, c1) = counts
    d = {k: (c1[k] - c0[k]) / (u1 - u0) for k in c0}
    teams = sum(v for k, v in d.items() if k.startswith("GOMP_parallel"))
    barriers = teams + (d.get("GOMP_loop_end", 0) + d.get("GOMP_barrier", 0)) / a.threads
    return nodes, teams, barriers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--levels", default="0,2", help="the two plan-model -O levels compared")
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--max-foreign", type=float, default=0.10)
    ap.add_argument("--max-wait", type=int, default=300, help="seconds to wait for a quiet machine before a run")
    ap.add_argument("--plan-dir", default="/tmp")
    ap.add_argument("--count", action="store_true", help="also nodes, thread teams and barriers per ubatch")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    levels = a.levels.split(",")
    if len(levels) != 2:
        sys.exit("bench-fusion: --levels takes two -O levels, e.g. 0,2")
    rows, left_out, counted = [], [], []
    probes = libgomp_probes() if a.count else []
    for model in a.models:
        name = os.path.basename(model).removesuffix(".gguf")
        plans = {}
        for lv in levels:
            plans[lv] = os.path.join(a.plan_dir, f"bench-fusion-{name}-O{lv}.plan")
            subprocess.run([a.build + "/bin/plan-model", "-m", model, f"-O{lv}", "-o", plans[lv]], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for test, p, n in (("pp", a.n_prompt, 0), ("tg", 0, a.n_gen)):
            if p == 0 and n == 0:
                continue
            if a.count:
                for lv in levels:
                    counted.append((name, f"{test}{p or n}", lv, count_per_ubatch(a, plans[lv], model, test, probes)))
            got = {lv: [] for lv in levels}
            for r in range(a.rounds):
                for lv in (levels if r % 2 == 0 else levels[::-1]):
                    cmd = [a.build + "/bin/stowage-run", "--plan", plans[lv], "-m", model, "bench", "-t",
                           str(a.threads), "-p", str(p), "-n", str(n), "-r", "1", "--json"]
                    wait_idle(a.max_foreign, a.max_wait)
                    out, _wall, foreign, _steal, _start = run_measured(cmd)
                    tps = json.loads(out)[test + "_tps"]
                    label = f"{name} {test} -O{lv} round {r + 1}: {tps:.2f} t/s, others used {foreign:.0%} of the CPUs"
                    print(label, file=sys.stderr, flush=True)
                    if foreign > a.max_foreign:
                        left_out.append(label)
                    else:
                        got[lv].append(tps)
            rows.append((name, f"{test}{p or n}", got))

    def fmt(v):
        if not v:
            return "- (0)"
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        return f"{statistics.mean(v):.2f} ± {sd:.2f} [{min(v):.2f}-{max(v):.2f}] ({len(v)})"

    a0, a1 = levels
    print(f"| model | test | -O{a0} t/s mean ± sd [min-max] (runs) | -O{a1} t/s | -O{a1} / -O{a0} |")
    print("|---|---|---|---|---:|")
    for name, test, got in rows:
        ratio = (f"{statistics.mean(got[a1]) / statistics.mean(got[a0]):.3f}"
                 if got[a0] and got[a1] else "-")
        print(f"| {name} | {test} | {fmt(got[a0])} | {fmt(got[a1])} | {ratio} |")
    if counted:
        print("\n| model | test | -O | nodes / ubatch | thread teams / ubatch | barriers / ubatch |")
        print("|---|---|---|---:|---:|---:|")
        for name, test, lv, c in counted:
            print(f"| {name} | {test} | {lv} | " + " | ".join("-" if v is None else f"{v:.1f}" for v in c) + " |")
    if left_out:
        print(f"\nleft out (others used more than {a.max_foreign:.0%} of the CPUs):")
        for l in left_out:
            print("  " + l)


if __name__ == "__main__":
    main()
