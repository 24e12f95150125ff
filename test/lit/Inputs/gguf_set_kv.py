#!/usr/bin/env python3
"""Copies a GGUF file, setting the value of an existing u32 or f32 metadata key (GGUF v3 spec: the
key string, then the u32 value type, 4 = UINT32 or 6 = FLOAT32, then 4 little-endian bytes). For
tests that need models with values gguf-synth refuses to write (NaN, 0, negative).
Usage: gguf_set_kv.py IN OUT KEY VALUE   (VALUE: an integer for u32; a float, 'nan' or 'inf' for f32)"""
import struct
import sys

src, dst, key, value = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
needle = struct.pack("<Q", len(key)) + key.encode()
at = data.find(needle)
if at < 0:
    sys.exit("%s: key %s not found" % (src, key))
at += len(needle)
vtype = struct.unpack_from("<I", data, at)[0]
if vtype == 4:
    struct.pack_into("<I", data, at + 4, int(value))
elif vtype == 6:
    struct.pack_into("<f", data, at + 4, float(value))
else:
    sys.exit("%s: key %s is neither u32 nor f32 (type %d)" % (src, key, vtype))
open(dst, "wb").write(data)
