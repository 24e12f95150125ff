#!/usr/bin/env python3
"""Copies a GGUF file, filling every element of one F32 tensor with a value (GGUF v3 spec: header,
key/value pairs, tensor infos, data section aligned to general.alignment, default 32). For tests that
need a model whose weights are not finite (NaN logits) while its metadata stays valid.
Usage: gguf_fill_tensor.py IN OUT TENSOR VALUE   (VALUE: a float, 'nan' or 'inf')"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(data, at, vtype):
    if vtype in SCALAR:
        return at + SCALAR[vtype]
    if vtype == 8:  # string
        return at + 8 + struct.unpack_from("<Q", data, at)[0]
    if vtype == 9:  # array
        etype, n = struct.unpack_from("<IQ", data, at)
        at += 12
        for _ in range(n):
            at = skip_value(data, at, etype)
        return at
    sys.exit("unknown value type %d" % vtype)


src, dst, name, value = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
at, alignment = 24, 32
for _ in range(n_kv):
    klen = struct.unpack_from("<Q", data, at)[0]
    key = data[at + 8:at + 8 + klen].decode()
    vtype = struct.unpack_from("<I", data, at + 8 + klen)[0]
    at = at + 12 + klen
    if key == "general.alignment":
        alignment = struct.unpack_from("<I", data, at)[0]
    at = skip_value(data, at, vtype)
found = None
for _ in range(n_tensors):
    nlen = struct.unpack_from("<Q", data, at)[0]
    tname = data[at + 8:at + 8 + nlen].decode()
    at += 8 + nlen
    n_dims = struct.unpack_from("<I", data, at)[0]
    ne = struct.unpack_from("<%dQ" % n_dims, data, at + 4)
    ttype, offset = struct.unpack_from("<IQ", data, at + 4 + 8 * n_dims)
    at += 4 + 8 * n_dims + 12
    if tname == name:
        found = (ne, ttype, offset)
if found is None:
    sys.exit("%s: tensor %s not found" % (src, name))
ne, ttype, offset = found
if ttype != 0:
    sys.exit("%s: tensor %s is not f32 (type %d)" % (src, name, ttype))
count = 1
for d in ne:
    count *= d
base = (at + alignment - 1) // alignment * alignment + offset
struct.pack_into("<%df" % count, data, base, *([float(value)] * count))
open(dst, "wb").write(data)
