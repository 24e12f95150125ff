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

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
TYPES = {"u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8}


def skip_value(data, at, vtype):
    """The offset just past a value of type vtype at `at`."""
    if vtype in SCALARS:
        return at + struct.calcsize("<" + SCALARS[vtype])
    if vtype == 8:
        return at + 8 + struct.unpack_from("<Q", data, at)[0]
    if vtype == 9:
        etype, count = struct.unpack_from("<IQ", data, at)
        at += 12
        for _ in range(count):
            at = skip_value(data, at, etype)
        return at
    sys.exit("unknown GGUF value type %d" % vtype)


def encode(vtype, text):
    if vtype == 8:
        b = text.encode()
        return struct.pack("<Q", len(b)) + b
    if vtype == 7:
        return struct.pack("<?", text == "true")
    return struct.pack("<" + SCALARS[vtype], float(text) if vtype == 6 else int(text))


def read_key(data, at):
    n = struct.unpack_from("<Q", data, at)[0]
    return data[at + 8:at + 8 + n].decode(), at + 8 + n


src, dst = sys.argv[1:3]
data = open(src, "rb").read()
magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", data, 0)
at = 24
kvs = []  # [key, encoded type + value]
for _ in range(n_kv):
    key, at = read_key(data, at)
    vtype = struct.unpack_from("<I", data, at)[0]
    end = skip_value(data, at + 4, vtype)
    kvs.append([key, data[at:end]])
    at = end
infos_start = at
for _ in range(n_tensors):
    _, at = read_key(data, at)
    n_dims = struct.unpack_from("<I", data, at)[0]
    at += 4 + 8 * n_dims + 12
infos = data[infos_start:at]
alignment = 32
for key, raw in kvs:
    if key == "general.alignment":
        alignment = struct.unpack_from("<I", raw, 4)[0]
tensor_data = data[(at + alignment - 1) // alignment * alignment:]

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
