#!/usr/bin/env python3
"""Reduces a refdump JSON (every prompt position x full vocabulary) to a golden of this folder:
the top 5 (id, logit) of every prompt position, the logits of 256 evenly spaced vocabulary ids at
every 8th position and the last one, the greedy tokens, and the model file's size and FNV-1a 64
hash (the e2e test regenerates the model with gguf-synth's library and checks it is the same file).
Usage: reduce.py REFDUMP.json MODEL.gguf SYNTH_ARGS > golden.json"""
import json
import sys


def fnv1a64(path):
    h = 0xcbf29ce484222325
    with open(path, "rb") as f:
        data = f.read()
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h, len(data)


ref = json.load(open(sys.argv[1]))
digest, size = fnv1a64(sys.argv[2])
n = len(ref["prompt_tokens"])
n_vocab = ref["n_vocab"]
step = max(1, n_vocab // 256)
ids = list(range(0, n_vocab, step))[:256]
positions = [i for i in range(n) if i % 8 == 7]
if n - 1 not in positions:
    positions.append(n - 1)
top5 = []
for row in ref["prompt_logits"]:
    order = sorted(range(n_vocab), key=lambda v: -row[v])[:5]
    top5.append([[v, row[v]] for v in order])
out = {
    "source": "refdump of node-llama-cpp@3.21.1 (llama.cpp, Sep 2026), CPU, n_ctx=n_batch=n_ubatch=256, 1 thread",
    "synth_args": sys.argv[3],
    "model_fnv1a64": digest,
    "model_bytes": size,
    "prompt": ref["prompt"],
    "n_vocab": n_vocab,
    "prompt_tokens": ref["prompt_tokens"],
    "ids": ids,
    "positions": positions,
    "logits": [[ref["prompt_logits"][p][v] for v in ids] for p in positions],
    "greedy": ref["greedy"],
    "top5": top5,
}
json.dump(out, sys.stdout, separators=(",", ":"))
