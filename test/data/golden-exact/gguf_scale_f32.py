#!/usr/bin/env python3
"""Copies a GGUF file, multiplying every element of the F32 tensors whose name contains NAME by
FACTOR (each product rounded to float32, as test::ScaleF32Tensors in test/unit/e2e/reduced_golden.h
computes it: a double product of two floats is exact, so its rounding is the float product's).
Usage: gguf_scale_f32.py IN OUT NAME=FACTOR...   (e.g. ffn_gate_inp=1000 exp_probs_b=0)"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../lit/Inputs"))
from gguf_layout import Gguf  # noqa: E402

if len(sys.argv) < 4:
    sys.exit(__doc__)
src, dst = sys.argv[1:3]
edits = []
for a in sys.argv[3:]:
    name, _, factor = a.partition("=")
    edits.append((name, float(factor)))
data = bytearray(open(src, "rb").read())
g = Gguf(data)
for name, factor in edits:
    hit = 0
    for tname, ne, ttype, offset in g.tensors:
        if name not in tname:
            continue
        if ttype != 0:
            sys.exit("%s: tensor %s is not f32 (type %d)" % (src, tname, ttype))
        count = 1
        for d in ne:
            count *= d
        base = g.data_start + offset
        vals = struct.unpack_from("<%df" % count, data, base)
        struct.pack_into("<%df" % count, data, base, *[v * factor for v in vals])
        hit += 1
    if hit == 0:
        sys.exit("%s: no tensor name contains %s" % (src, name))
open(dst, "wb").write(data)
