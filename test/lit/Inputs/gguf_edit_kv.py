#!/usr/bin/env python3
"""Copies a GGUF file with metadata keys set (to any type), removed, or one element of a string
array replaced; the tensor infos and the tensor data are kept (the data section re-aligned to
general.alignment, 32 by default, as the GGUF v3 spec lays it out). For tests that need metadata
gguf-synth refuses to write (a key of the wrong type, a duplicate token, a missing key).
Usage: gguf_edit_kv.py IN OUT EDIT...
  set KEY TYPE VALUE        TYPE: str, u32, i32, f32 or bool (VALUE true/false)
  arr KEY TYPE COUNT VALUE  an array of COUNT copies of VALUE (TYPE as above)
  elem KEY INDEX TEXT       element INDEX of the string array KEY becomes TEXT
  del KEY"""
import struct
import sys

from gguf_layout import TYPES, SCALARS, Gguf, skip_value


def encode(vtype, text):
    if vtype == 8:
        b = text.encode()
        return struct.pack("<Q", len(b)) + b
    if vtype == 7:
        return struct.pack("<?", text == "true")
    return struct.pack("<" + SCALARS[vtype], float(text) if vtype == 6 else int(text))


src, dst = sys.argv[1:3]
data = open(src, "rb").read()
g = Gguf(data)
magic, version, n_tensors, kvs, alignment = g.magic, g.version, len(g.tensors), g.kvs, g.alignment
infos = data[g.infos_start:g.infos_end]
tensor_data = data[g.data_start:]

args = sys.argv[3:]
while args:
    op = args.pop(0)
    key = args.pop(0)
    if op == "del":
        kvs = [kv for kv in kvs if kv[0] != key]
        continue
    if op == "set":
        vtype = TYPES[args.pop(0)]
        raw = struct.pack("<I", vtype) + encode(vtype, args.pop(0))
    elif op == "arr":
        etype, count, value = TYPES[args.pop(0)], int(args.pop(0)), args.pop(0)
        raw = struct.pack("<IIQ", 9, etype, count) + encode(etype, value) * count
    elif op == "elem":
        index, text = int(args.pop(0)), args.pop(0)
        old = next(raw for k, raw in kvs if k == key)
        etype, count = struct.unpack_from("<IQ", old, 4)
        assert etype == 8, "elem edits string arrays"
        elems, pos = [], 16
        for _ in range(count):
            end = skip_value(old, pos, 8)
            elems.append(old[pos:end])
            pos = end
        elems[index] = encode(8, text)
        raw = old[:16] + b"".join(elems)
    else:
        sys.exit("unknown edit %s" % op)
    for kv in kvs:
        if kv[0] == key:
            kv[1] = raw
            break
    else:
        kvs.append([key, raw])

out = bytearray(struct.pack("<IIQQ", magic, version, n_tensors, len(kvs)))
for key, raw in kvs:
    out += encode(8, key) + raw
out += infos
out += b"\0" * (-len(out) % alignment)
out += tensor_data
open(dst, "wb").write(out)
