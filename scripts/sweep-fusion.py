#!/usr/bin/env python3
"""Sweep the compiler's rewriting passes (-O2) for wrong results.

For each case: make a small gguf-synth model, plan it with plan-model at -O0 and at -O2 (same
devices, compat, flash attention, ubatch, sequences), run both plans with stowage-run --temp 0
--dump-logits and compare the logits byte for byte (the fused ops are bit-identical to the
sequences they replace on the CPU backend). GPU plans that cannot run here are planned at -O2
and checked by plan-dump --check-memory (the plan verifier and the memory overlap check).

Before the sweep a negative control runs the same comparison against an -O0 plan whose KV cache
type differs (-ctk f32 instead of f16: one node type changed) and must see the logits differ, so
a comparison that cannot fail fails the sweep.

Runs one process at a time. Exit status 0 when every case matches, 1 otherwise (77: no
vocabulary model, a skip); each mismatch is printed with the commands that reproduce it.
--quick (30-50 s) is the ctest sweep_fusion; the default (every architecture x weight type x
-fa x prompt on this machine's devices, then the other devices and feb25) takes about 15 min.

  scripts/sweep-fusion.py --bin build/bin [--quick | --full] [--work DIR] [--arch A,B] [-k]
"""

import argparse
import itertools
import os
import shlex
import subprocess
import sys
import tempfile
import time

SHORT_PROMPT = "Once upon a time there was a"
# Longer than 32 tokens with the stories260K vocabulary (the GEMM path of the CPU MUL_MAT).
LONG_PROMPT = ("Once upon a time there was a little girl named Lily. She loved to play outside "
               "in the park with her big red ball and her friend Tom, who was very kind.")
# About 40 tokens with the stories260K vocabulary, run with -ub 8 (several ubatches).
UB_PROMPT = ("Once upon a time there was a little dog named Max. He liked to run in the "
             "park and")

ARCHS = [
    ("llama", []),
    ("qwen2", []),
    ("qwen2moe", []),
    ("mixtral", []),
    ("qwen3", []),
    ("qwen3moe", []),
    ("phi3", []),
    ("gemma", []),
    ("gemma2", ["--sliding-window", "16", "--sliding-window-pattern", "2"]),
    ("gemma3", ["--sliding-window", "16", "--sliding-window-pattern", "2"]),
    ("mamba", []),
    ("mistral3", []),
    ("granite", []),
    ("smollm3", []),
    ("glm4moe", []),
    ("gpt-oss", []),
    ("deepseek2", []),
    ("deepseek2-legacy", ["--mla-legacy"]),
]

TYPES = ["default", "f32", "f16", "bf16", "q8_0", "q4_0", "mxfp4", "q4_K_M"]
DEVICES = ["default", "none", "cpu"]
COMPATS = ["2026", "feb25"]
FAS = ["on", "off"]
# scenario: (name, plan-model args, prompt, tokens to generate)
SCENARIOS = [
    ("short", [], SHORT_PROMPT, 8),
    ("long", [], LONG_PROMPT, 4),
    ("ub8", ["-ub", "8"], UB_PROMPT, 4),
    ("np2kvu", ["-np", "2", "-kvu"], SHORT_PROMPT, 8),
]


class Runner:

    def __init__(self, args):
        self.bin = args.bin
        self.work = args.work
        self.vocab = args.vocab
        self.verbose = args.verbose
        self.quantize = args.quantize
        self.models = {}

    def tool(self, name):
        return os.path.join(self.bin, name)

    def run(self, cmd):
        if self.verbose:
            print("  $ " + shlex.join(cmd), flush=True)
        for attempt in range(30):
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace")
                return p.returncode, p.stdout
            except OSError as e:
                # A tool being relinked by a build in this tree: wait for it.
                if attempt == 29:
                    return 126, f"{cmd[0]}: {e}"
                time.sleep(2)

    def model(self, arch, extra, wtype, seed=1):
        key = (arch, wtype, seed)
        if key in self.models:
            return self.models[key]
        real_arch = "deepseek2" if arch == "deepseek2-legacy" else arch
        path = os.path.join(self.work, f"{arch}-{wtype}-s{seed}.gguf")
        cmd = [self.tool("gguf-synth"), "--arch", real_arch, "--n-layer", "2", "--seed", str(seed),
               "--vocab-from", self.vocab, "-o", path] + extra
        if wtype == "q4_K_M":
            # gguf-synth writes no K-quants: llama.cpp's quantize makes Q4_K_M of an F32 file
            # whose rows are 256 wide (K-quant blocks).
            if not os.access(self.quantize, os.X_OK):
                self.models[key] = (None, [f"no llama.cpp quantize at {self.quantize}"])
                return self.models[key]
            cmd[cmd.index("-o") + 1] = path + ".f32"
            cmd += ["--type", "f32", "--n-embd", "256", "--n-ff", "512"]
        elif wtype != "default":
            cmd += ["--type", wtype]
        rc, out = self.run(cmd)
        if rc == 0 and wtype == "q4_K_M":
            qcmd = [self.quantize, path + ".f32", path, "15"]
            rc, out = self.run(qcmd)
            cmd = shlex.join(cmd) + " && REF_BACKEND_DIR=" + shlex.quote(
                os.environ.get("REF_BACKEND_DIR", "")) + " " + shlex.join(qcmd)
            cmd = ["sh", "-c", cmd]
        result = (path, cmd) if rc == 0 else (None, out.strip().splitlines()[-1:] or [""])
        self.models[key] = result
        return result

    def plan_cmd(self, model, out, olevel, device, compat, fa, extra):
        cmd = [self.tool("plan-model"), "-m", model, "-c", "256", "-O", str(olevel),
               "--llamacpp-compat", compat, "-fa", fa, "-o", out]
        if device != "default":
            cmd += ["--device", device]
        return cmd + extra

    def run_cmd(self, model, plan, prompt, n, logits):
        return [self.tool("stowage-run"), "-m", model, "--plan", plan, "-p", prompt, "-n", str(n),
                "--temp", "0", "-t", "1", "-q", "--dump-logits", logits]


def first_diff_row(a, b, n_vocab):
    """The first decode row (0: the prompt's) and vocab index where two logits dumps differ."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        da, db = fa.read(), fb.read()
    if len(da) != len(db):
        return f"sizes {len(da)} vs {len(db)} bytes"
    for i in range(0, len(da), 4):
        if da[i:i + 4] != db[i:i + 4]:
            idx = i // 4
            if n_vocab:
                return f"row {idx // n_vocab}, logit {idx % n_vocab}"
            return f"float {idx}"
    return "identical"


def compare_case(r, tag, model, device, compat, fa, scen, ref_extra=None, ref_model=None):
    """Plans -O0 and -O2 and compares their logits. Returns (status, detail, commands)."""
    sname, sargs, prompt, n = scen
    base = os.path.join(r.work, "case")
    p0, p2 = base + "-O0.plan", base + "-O2.plan"
    l0, l2 = base + "-O0.logits", base + "-O2.logits"
    for f in (p0, p2, l0, l2):
        if os.path.exists(f):
            os.remove(f)
    c_p0 = r.plan_cmd(ref_model or model, p0, 0, device, compat, fa, sargs + (ref_extra or []))
    c_p2 = r.plan_cmd(model, p2, 2, device, compat, fa, sargs)
    c_r0 = r.run_cmd(ref_model or model, p0, prompt, n, l0)
    c_r2 = r.run_cmd(model, p2, prompt, n, l2)
    cmds = [c_p0, c_p2, c_r0, c_r2, ["cmp", l0, l2]]
    rc, out = r.run(c_p0)
    if rc != 0:
        return "skip", "-O0 plan: " + (out.strip().splitlines() or [""])[-1], cmds
    rc, out = r.run(c_r0)
    if rc != 0:
        return "skip", "-O0 run: " + (out.strip().splitlines() or [""])[-1], cmds
    rc, out = r.run(c_p2)
    if rc != 0:
        return "FAIL", "-O2 plan failed where -O0 ran: " + (out.strip().splitlines()
                                                             or [""])[-1], cmds
    rc, out = r.run(c_r2)
    if rc != 0:
        return "FAIL", "-O2 run failed where -O0 ran: " + (out.strip().splitlines()
                                                           or [""])[-1], cmds
    with open(l0, "rb") as f0, open(l2, "rb") as f2:
        same = f0.read() == f2.read()
    if same:
        with open(p0, "rb") as f0, open(p2, "rb") as f2:
            rewritten = f0.read() != f2.read()
        return "ok", "" if rewritten else "(the -O2 plan is the -O0 plan)", cmds
    return "FAIL", "logits differ: " + first_diff_row(l0, l2, 512), cmds


def gpu_plan_case(r, model, compat, fa):
    """Plans a registry GPU machine at -O2 (not runnable here) and checks it with plan-dump."""
    plan = os.path.join(r.work, "gpu-O2.plan")
    if os.path.exists(plan):
        os.remove(plan)
    c_plan = r.plan_cmd(model, plan, 2, "h200,cpu", compat, fa,
                        ["--free", "CPU=16GiB", "-ngl", "2"])
    c_check = [r.tool("plan-dump"), plan, "--check-memory", "-m", model]
    rc, out = r.run(c_plan)
    if rc != 0:
        c_plan0 = c_plan[:]
        c_plan0[c_plan0.index("-O") + 1] = "0"
        rc0, _ = r.run(c_plan0)
        if rc0 == 0:
            rc0, out0 = r.run(c_check)
            if rc0 != 0:
                return "skip", "the -O0 GPU plan fails plan-dump too: " + (
                    out0.strip().splitlines() or [""])[-1], [c_plan0, c_check]
        if rc0 != 0:
            return "skip", "-O0 GPU plan fails too", [c_plan]
        return "FAIL", "-O2 GPU plan failed: " + (out.strip().splitlines() or [""])[-1], [c_plan]
    rc, out = r.run(c_check)
    if rc != 0:
        return "FAIL", "plan-dump --check-memory: " + (out.strip().splitlines()
                                                       or [""])[-1], [c_plan, c_check]
    return "ok", "", [c_plan, c_check]


def negative_control(r):
    """The comparison must see a plan that differs in one node type (the K cache's)."""
    path, info = r.model("llama", [], "default")
    if path is None:
        print("negative control: gguf-synth failed: " + " ".join(info))
        return False
    status, detail, cmds = compare_case(r, "control", path, "cpu", "2026", "on", SCENARIOS[0],
                                        ref_extra=["-ctk", "f32"])
    if status == "FAIL" and detail.startswith("logits differ"):
        print(f"negative control: -O0 plan with -ctk f32 vs -O2 with f16 differ as they must "
              f"({detail})")
        return True
    print(f"negative control did not see the difference ({status} {detail}):")
    for c in cmds:
        print("  " + shlex.join(c))
    return False


def matrix(mode, archs):
    """The cases: (arch, extra, wtype, device, compat, fa, scenario)."""
    arch_list = [a for a in ARCHS if not archs or a[0] in archs]
    if mode == "quick":
        # Every architecture with its default weights on this machine's devices, 2026, both
        # flash-attention settings, the short and the several-ubatch prompts; then the weight
        # types of one dense and one MLA model, and the other device lists and feb25 on llama.
        for (a, e) in arch_list:
            for fa in FAS:
                yield (a, e, "default", "default", "2026", fa, SCENARIOS[0])
            yield (a, e, "default", "default", "2026", "on", SCENARIOS[2])
        for a in ("llama", "deepseek2"):
            if archs and a not in archs:
                continue
            e = dict(ARCHS)[a]
            for t in ("f32", "q4_0"):
                yield (a, e, t, "default", "2026", "on", SCENARIOS[1])
        if not archs or "llama" in archs:
            for d in ("none", "cpu"):
                yield ("llama", [], "default", d, "2026", "off", SCENARIOS[3])
            yield ("llama", [], "default", "default", "feb25", "off", SCENARIOS[1])
        return
    if mode == "full":
        for (a, e), t, d, c, fa, s in itertools.product(arch_list, TYPES, DEVICES, COMPATS, FAS,
                                                        SCENARIOS):
            yield (a, e, t, d, c, fa, s)
        return
    # standard: every architecture x weight type on the default devices with 2026 and both -fa,
    # all scenarios; other devices and feb25 with the default type.
    for (a, e), t, fa, s in itertools.product(arch_list, TYPES, FAS, SCENARIOS):
        yield (a, e, t, "default", "2026", fa, s)
    for (a, e), d, c, fa, s in itertools.product(arch_list, DEVICES, COMPATS, FAS, SCENARIOS):
        if d == "default" and c == "2026":
            continue
        yield (a, e, "default", d, c, fa, s)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "bin"))
    ap.add_argument("--vocab", default="/work/shared/models/stories260K.gguf")
    ap.add_argument("--quantize", default=os.path.expanduser("~/.cache/llamacpp-ref/quantize"),
                    help="llama.cpp's quantize (scripts/llamacpp-ref) for --type q4_K_M models")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", const="quick", dest="mode")
    g.add_argument("--full", action="store_const", const="full", dest="mode")
    ap.add_argument("--arch", help="comma-separated architectures (default: all)")
    ap.add_argument("--no-gpu-plans", action="store_true")
    ap.add_argument("-k", "--keep-going", action="store_true", help="(always on) run every case")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    mode = args.mode or "standard"
    archs = set(args.arch.split(",")) if args.arch else set()
    if not os.path.exists(args.vocab):
        print(f"sweep-fusion: skipped: no vocabulary model {args.vocab}")
        return 77
    if os.path.isdir(os.path.expanduser("~/.cache/llamacpp-ref/bin/package/bins/linux-x64")):
        os.environ.setdefault("REF_BACKEND_DIR",
                              os.path.expanduser("~/.cache/llamacpp-ref/bin/package/bins/linux-x64"))
    tmp = None
    if not args.work:
        tmp = tempfile.TemporaryDirectory(prefix="sweep-fusion-")
        args.work = tmp.name
    os.makedirs(args.work, exist_ok=True)
    r = Runner(args)
    start = time.time()
    if not negative_control(r):
        return 1
    counts = {"ok": 0, "skip": 0, "FAIL": 0, "unchanged": 0}
    fails = []
    for (a, e, t, d, c, fa, s) in matrix(mode, archs):
        tag = f"{a} type={t} device={d} compat={c} fa={fa} {s[0]}"
        path, info = r.model(a, e, t)
        if path is None:
            counts["skip"] += 1
            print(f"skip {tag}: gguf-synth: {' '.join(info)}", flush=True)
            continue
        status, detail, cmds = compare_case(r, tag, path, d, c, fa, s)
        counts[status] += 1
        if status == "ok" and detail:
            counts["unchanged"] += 1
        print(f"{status} {tag}" + (f": {detail}" if detail else ""), flush=True)
        if status == "FAIL":
            fails.append((tag, detail, [info] + cmds))
    if not args.no_gpu_plans:
        for (a, e) in [x for x in ARCHS if not archs or x[0] in archs]:
            types = ["default"] if mode == "quick" else TYPES
            for t in types:
                path, info = r.model(a, e, t)
                if path is None:
                    continue
                for c in (COMPATS[:1] if mode == "quick" else COMPATS):
                    tag = f"{a} type={t} device=h200,cpu -ngl 2 compat={c} (plan only)"
                    status, detail, cmds = gpu_plan_case(r, path, c, "auto")
                    counts[status] += 1
                    print(f"{status} {tag}" + (f": {detail}" if detail else ""), flush=True)
                    if status == "FAIL":
                        fails.append((tag, detail, [info] + cmds))
    print(f"\nsweep-fusion ({mode}): {counts['ok']} ok, {counts['FAIL']} failed, "
          f"{counts['skip']} skipped ({counts['unchanged']} ok cases had nothing to rewrite), "
          f"{time.time() - start:.0f} s")
    for tag, detail, cmds in fails:
        print(f"\nFAIL {tag}: {detail}")
        for c in cmds:
            print("  " + shlex.join(c))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
