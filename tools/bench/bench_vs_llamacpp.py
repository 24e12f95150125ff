#!/usr/bin/env python3
"""Measuring loop of scripts/bench-vs-llamacpp.sh (see its header for the method and why).

Per model: pp of both runtimes (REPS repetitions in one process each, no bound), then REPS
repetitions of one tg run of each runtime, every run bracketed by bandwidth probes
(tools/bench/membw.c): probe, run, probe, run, probe, ... (a probe between two runs serves both; the
runtime that goes first alternates per repetition). A tg run's bound is the mean of its two adjacent
probes; a run whose probes differ by more than --max-probe-change (the machine changed bandwidth
mode during the run) or during which (with its two probes) other processes used more than
--max-foreign of the CPUs is reported and left out of every tg figure. Kept runs are classed
slow/fast by their probe (split at the midpoint between the lowest and highest probe adjacent to a
kept run, when those differ by more than --mode-split; else one class).

Invoked by the script with the built tools and the models; prints a markdown table to stdout and,
with --raw FILE, writes every run (tg, pp and probes) as CSV.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def proc_stat():
    """Aggregate CPU jiffies from /proc/stat: (busy, steal). busy = user+nice+system+irq+softirq."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return user + nice + system + irq + softirq, steal


def run_measured(cmd):
    """Runs cmd, returns (stdout, wall seconds, foreign CPU share, steal share, start time).

    foreign = (CPU time the whole machine was busy - CPU time of cmd itself) / (NCPU * wall): the
    share of the machine other processes (others' builds, kernel threads) used while cmd ran.
    steal = time the hypervisor took from this VM's vCPUs, same unit."""
    b0, s0 = proc_stat()
    start = time.time()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out = p.stdout.read()
    p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    b1, s1 = proc_stat()
    code = os.waitstatus_to_exitcode(status)
    p.returncode = code  # reaped by wait4 above
    if code != 0:
        sys.exit(f"bench-vs-llamacpp: {' '.join(map(str, cmd))} failed (exit {code})")
    own = ru.ru_utime + ru.ru_stime
    cap = NCPU * max(wall, 1e-9)
    foreign = max(0.0, (b1 - b0) / CLK_TCK - own) / cap
    steal = (s1 - s0) / CLK_TCK / cap
    return out.decode(), wall, foreign, steal, start


# llama.cpp set_swa_pattern defaults (layer il slides when il % P < P - 1) of the architectures whose
# files may omit <arch>.attention.sliding_window_pattern.
SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}


def bytes_per_token(d, n_gen):
    """Bytes one generated token reads (the bound's numerator), from gguf-dump --json `d`: every
    weight but token_embd (one row via GET_ROWS); of an expert stack (a tensor named *_exps.*: the
    experts' matrices and biases) only the n_expert_used experts chosen of n_expert (token
    generation reads only those); and the F16 KV cache the attention reads: per layer
    (n_embd_k_gqa + n_embd_v_gqa) * 2 bytes per cell, over min(pos + 1, window) cells (window only
    on the sliding-window layers), averaged over the n_gen positions of a tg run from an empty
    cache. Returns (total, weights, kv)."""
    meta = {m["key"]: m["value"] for m in d["metadata"]}
    arch = meta["general.architecture"]
    k = lambda key, default=None: meta.get(f"{arch}.{key}", default)
    n_expert, n_used = k("expert_count", 0), k("expert_used_count", 0)
    weights = 0.0
    for x in d["tensors"]:
        if x["name"] == "token_embd.weight":
            continue
        expert = n_expert > 0 and "_exps." in x["name"]
        weights += x["nbytes"] * (n_used / n_expert if expert else 1)
    kv = 0.0
    n_layer, n_head = k("block_count"), k("attention.head_count")
    n_head_kv = k("attention.head_count_kv", n_head)
    hd_k = k("attention.key_length", k("embedding_length") // n_head)
    hd_v = k("attention.value_length", hd_k)
    window = k("attention.sliding_window", 0)
    period = k("attention.sliding_window_pattern", SWA_PATTERN.get(arch, 0))
    for il in range(n_layer):
        hkv = n_head_kv[il] if isinstance(n_head_kv, list) else n_head_kv
        swa = window > 0 and period > 0 and il % period < period - 1
        cells = sum(min(p + 1, window) if swa else p + 1 for p in range(n_gen)) / n_gen
        kv += hkv * (hd_k + hd_v) * 2 * cells
    return weights + kv, weights, kv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bench-dir", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--n-prompt", type=int, required=True)
    ap.add_argument("--n-gen", type=int, required=True)
    ap.add_argument("--stowage-flags", default="")
    ap.add_argument("--raw", default="")
    ap.add_argument("--probe-mib", type=int, default=512)
    ap.add_argument("--probe-passes", type=int, default=5)
    ap.add_argument("--max-probe-change", type=float, default=0.15)
    ap.add_argument("--max-foreign", type=float, default=0.10)
    ap.add_argument("--mode-split", type=float, default=0.25)
    ap.add_argument("models", nargs="+", help="TYPE=PATH")
    a = ap.parse_args()
    if a.reps < 1 or a.n_gen < 1:
        sys.exit("bench-vs-llamacpp: REPS and N_GEN must be >= 1")
    bd, T = a.bench_dir, str(a.threads)
    stowage = [a.build + "/bin/stowage-run", "bench", "-t", T] + a.stowage_flags.split() + ["--json"]
    ref = [bd + "/llama_bench_ref"]
    rows = []  # every run and probe, in order (the --raw dump)

    # One probe process for the whole run (membw ... serve): its buffer is faulted in once, so a
    # probe costs only its passes (tens of ms) and reads the same pages every time.
    server = subprocess.Popen([bd + "/membw", T, str(a.probe_mib), str(a.probe_passes), "serve"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, OMP_WAIT_POLICY="passive"))

    def server_cpu():
        with open(f"/proc/{server.pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / CLK_TCK  # utime, stime (fields 14, 15 of proc(5))

    def probe(t):
        b0, s0 = proc_stat()
        c0 = server_cpu()
        start = time.time()
        t0 = time.monotonic()
        server.stdin.write("\n")
        server.stdin.flush()
        line = server.stdout.readline()
        wall = time.monotonic() - t0
        b1, s1 = proc_stat()
        if not line:
            sys.exit(f"bench-vs-llamacpp: the bandwidth probe (membw serve) ended (exit {server.wait()})")
        cap = NCPU * max(wall, 1e-9)
        foreign = max(0.0, (b1 - b0) / CLK_TCK - (server_cpu() - c0)) / cap
        r = dict(type=t, what="probe", rep="", tps="", gbs=float(line), wall_s=wall, foreign=foreign,
                 steal=(s1 - s0) / CLK_TCK / cap, start=start)
        rows.append(r)
        return r

    server.stdin.write("\n")  # wait for the buffer to be faulted in; this first probe is not used
    server.stdin.flush()
    server.stdout.readline()

    models = []
    for spec in a.models:
        t, m = spec.split("=", 1)
        d = json.loads(subprocess.run([a.build + "/bin/gguf-dump", "--json", m], capture_output=True,
                                      text=True, check=True).stdout)
        per_tok, w_tok, kv_tok = bytes_per_token(d, a.n_gen)
        models.append(dict(type=t, path=m, per_tok=per_tok, w_tok=w_tok, kv_tok=kv_tok,
                           size=os.path.getsize(m) / 2**30,
                           rss={"stowage": 0, "llama.cpp": 0}, pp={}, tg=[]))

    for md in models:
        t, m = md["type"], md["path"]
        # The same page-cache state for every file and run (huge folios; see tools/bench/hugewarm.c).
        subprocess.run([bd + "/hugewarm", m], check=True, stdout=sys.stderr)
        cmds = {
            "stowage": lambda p, n, r: stowage + ["-m", m, "-p", str(p), "-n", str(n), "-r", str(r)],
            "llama.cpp": lambda p, n, r: ref + [m, str(p), str(n), T, str(r)],
        }
        if a.n_prompt > 0:
            for rt in ("stowage", "llama.cpp"):
                out, wall, foreign, steal, start = run_measured(cmds[rt](a.n_prompt, 0, a.reps))
                j = json.loads(out)
                md["rss"][rt] = max(md["rss"][rt], j["maxrss_kib"])
                md["pp"][rt] = dict(tps=j["pp_tps"], sd=j["pp_sd"], foreign=foreign)
                rows.append(dict(type=t, what=rt + " pp", rep="", tps=j["pp_tps"], gbs="", wall_s=wall,
                                 foreign=foreign, steal=steal, start=start))
        prev = probe(t)
        for rep in range(a.reps):
            order = ("stowage", "llama.cpp") if rep % 2 == 0 else ("llama.cpp", "stowage")
            for rt in order:
                out, wall, foreign, steal, start = run_measured(cmds[rt](0, a.n_gen, 1))
                nxt = probe(t)
                j = json.loads(out)
                md["rss"][rt] = max(md["rss"][rt], j["maxrss_kib"])
                bw0, bw1 = prev["gbs"], nxt["gbs"]
                why = []
                if abs(bw0 - bw1) > a.max_probe_change * min(bw0, bw1):
                    why.append(f"probes {bw0:.1f} -> {bw1:.1f} GB/s (mode change)")
                # Other processes' share of the CPUs over probe + run + probe (a probe alone is a
                # few jiffies: too coarse to judge on its own).
                spans = [(foreign, wall), (prev["foreign"], prev["wall_s"]), (nxt["foreign"], nxt["wall_s"])]
                busy = sum(f * w for f, w in spans) / sum(w for _, w in spans)
                if busy > a.max_foreign:
                    why.append(f"other processes used {100 * busy:.0f}% of the CPUs")
                bw = (bw0 + bw1) / 2
                r = dict(type=t, what=rt + " tg", rep=rep + 1, tps=j["tg_tps"], gbs=bw, wall_s=wall,
                         foreign=foreign, foreign_bracket=busy, steal=steal, start=start,
                         probe_before=bw0, probe_after=bw1,
                         pct=100 * j["tg_tps"] * md["per_tok"] / (bw * 1e9), kept=not why,
                         why="; ".join(why), rt=rt)
                rows.append(r)
                md["tg"].append(r)
                prev = nxt

    server.stdin.close()
    server.wait()

    # Modes: split the kept runs' adjacent probes at the midpoint of their range.
    kept = [r for md in models for r in md["tg"] if r["kept"]]
    pv = [x for r in kept for x in (r["probe_before"], r["probe_after"])]
    split = None
    if pv and max(pv) > (1 + a.mode_split) * min(pv):
        split = (min(pv) + max(pv)) / 2
    for md in models:
        for r in md["tg"]:
            r["mode"] = "" if not r["kept"] else ("one" if split is None else ("slow" if r["gbs"] < split else "fast"))
    modes = ["one"] if split is None else ["slow", "fast"]

    # Header and table.
    allp = [r["gbs"] for r in rows if r["what"] == "probe"]
    print(f"threads: {a.threads}   reps: {a.reps}   stowage-run flags: {a.stowage_flags or '(none)'}   "
          f"tg runs: {len(kept)} kept of {sum(len(md['tg']) for md in models)}")
    print(f"bandwidth probes (membw {a.threads} {a.probe_mib} {a.probe_passes}, GB/s): {len(allp)}, "
          f"min {min(allp):.1f}, median {statistics.median(allp):.1f}, max {max(allp):.1f}; " +
          ("one mode (kept runs' probes within "
           f"{100 * a.mode_split:.0f}%)" if split is None else f"modes split at {split:.1f} GB/s"))
    for md in models:
        print(f"{md['type']}: bytes read per generated token {md['per_tok'] / 1e6:.1f} MB (weights, the chosen "
              f"experts' only: {md['w_tok'] / 1e6:.1f}; F16 KV cache, mean over tg{a.n_gen}: "
              f"{md['kv_tok'] / 1e6:.2f})")
    print("% of bound = tg t/s * bytes read per token / mean of the two probes adjacent to the run; "
          "mode rows: mean ± sd over that mode's kept runs (count); 'all': median over all kept runs "
          "(ratio: over repetitions whose two runs were kept in the same mode)")
    P, N = (a.n_prompt if a.n_prompt > 0 else " (not run)"), a.n_gen
    print(f"| type | size GiB | stowage pp{P} | llama.cpp pp{P} | ratio | tg mode (probe GB/s) | stowage tg{N} "
          f"| llama.cpp tg{N} | ratio | stowage % of bound | llama.cpp % of bound | peak RSS MiB (stowage / llama.cpp) |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")

    def ms(v, fmt, unit=""):
        """'mean ± sd (count)', the sd only from two values up."""
        if not v:
            return "-"
        sd = " ± " + fmt.format(statistics.stdev(v)) + unit if len(v) > 1 else ""
        return fmt.format(statistics.mean(v)) + unit + sd + f" ({len(v)})"

    def ratio(x, y):
        return f"{statistics.mean(x) / statistics.mean(y):.2f}" if x and y and statistics.mean(y) > 0 else "-"

    for md in models:
        pp = md["pp"]
        if a.n_prompt > 0:
            s, l = pp["stowage"], pp["llama.cpp"]
            ppcells = [f"{s['tps']:.2f} ± {s['sd']:.2f}", f"{l['tps']:.2f} ± {l['sd']:.2f}",
                       f"{s['tps'] / l['tps']:.2f}" if l["tps"] > 0 else "-"]
        else:
            ppcells = ["-", "-", "-"]
        first = True
        for mode in modes + ["all"]:
            rs = [r for r in md["tg"] if r["kept"] and (mode == "all" or r["mode"] == mode)]
            if mode != "all" and not rs:
                continue
            st = [r for r in rs if r["rt"] == "stowage"]
            ll = [r for r in rs if r["rt"] == "llama.cpp"]
            bws = [x for r in rs for x in (r["probe_before"], r["probe_after"])]
            bwcell = f"{statistics.mean(bws):.1f}" if bws else "-"
            if mode == "all":
                # tg medians over both modes would compare different mode mixes; the ratio is the
                # median over repetitions whose two runs were both kept and in the same mode.
                pairs = []
                for rep in range(1, a.reps + 1):
                    pr = {r["rt"]: r for r in rs if r["rep"] == rep}
                    if len(pr) == 2 and pr["stowage"]["mode"] == pr["llama.cpp"]["mode"]:
                        pairs.append(pr["stowage"]["tps"] / pr["llama.cpp"]["tps"])
                med = lambda v, f: (f.format(statistics.median(v)) + f" ({len(v)})") if v else "-"
                cells = ["all: median" if rs else "all: no kept run", "", "",
                         med(pairs, "{:.2f}") + (" same-mode pairs" if pairs else ""),
                         med([r["pct"] for r in st], "{:.0f}%"), med([r["pct"] for r in ll], "{:.0f}%")]
            else:
                sv, lv = [r["tps"] for r in st], [r["tps"] for r in ll]
                cells = [f"{mode} ({bwcell})", ms(sv, "{:.2f}"), ms(lv, "{:.2f}"), ratio(sv, lv),
                         ms([r["pct"] for r in st], "{:.0f}", "%"), ms([r["pct"] for r in ll], "{:.0f}", "%")]
            head = [md["type"], f"{md['size']:.2f}"] + ppcells if first else ["", ""] + ["", "", ""]
            tail = [f"{md['rss']['stowage'] / 1024:.0f} / {md['rss']['llama.cpp'] / 1024:.0f}" if first else ""]
            print("| " + " | ".join(head + cells + tail) + " |")
            first = False

    left = [r for md in models for r in md["tg"] if not r["kept"]]
    for r in left:
        print(f"left out: {r['type']} {r['rt']} tg rep {r['rep']}: {r['tps']:.2f} t/s ({r['pct']:.0f}% of the bound "
              f"of the mean probe) -- {r['why']}")
    for md in models:
        for rt, p in md["pp"].items():
            if p["foreign"] > a.max_foreign:
                print(f"note: {md['type']} {rt} pp: other processes used {100 * p['foreign']:.0f}% of the CPUs "
                      "during the run (pp figure is noisy)")

    if a.raw:
        cols = ["type", "what", "rep", "tps", "gbs", "probe_before", "probe_after", "pct", "mode", "kept",
                "why", "wall_s", "foreign", "foreign_bracket", "steal", "start"]
        with open(a.raw, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow(r)
        print(f"all runs and probes: {a.raw}")


if __name__ == "__main__":
    main()
