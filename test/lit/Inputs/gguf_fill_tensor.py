#!/usr/bin/env python3
"""Copies a GGUF file, filling every element of one F32 tensor with a value (GGUF v3 spec: header,
key/value pairs, tensor infos, data section aligned to general.alignment, default 32). For tests that
need a model whose weights are not finite (NaN logits) while its metadata stays valid.
Usage: gguf_fill_tensor.py IN OUT TENSOR VALUE   (VALUE: a float, 'nan' or 'inf')"""
import struct
import sys

from gguf_layout import Gguf

src, dst, name, value = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
g = Gguf(data)
found = next(((ne, ttype, offset) for tname, ne, ttype, offset in g.tensors if tname == name), None)
if found is None:
    sys.exit("%s: tensor %s not found" % (src, name))
ne, ttype, offset = found
if ttype != 0:
    sys.exit("%s: tensor %s is not f32 (type %d)" % (src, name, ttype))
count = 1
for d in ne:
    count *= d
base = g.data_start + offset
struct.pack_into("<%df" % count, data, base, *([float(value)] * count))
open(dst, "wb").write(data)
