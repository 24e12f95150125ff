#!/usr/bin/env python3
"""Copies a GGUF file, setting the value of an existing F32 metadata key (GGUF v3 spec: the key
string, then the u32 value type 6 = FLOAT32, then 4 little-endian bytes). For tests that need
models with values gguf-synth refuses to write (NaN, negative).
Usage: gguf_set_f32.py IN OUT KEY VALUE   (VALUE: a float, 'nan' or 'inf')"""
import struct
import sys

src, dst, key, value = sys.argv[1:5]
data = bytearray(open(src, "rb").read())
needle = struct.pack("<Q", len(key)) + key.encode()
at = data.find(needle)
if at < 0:
    sys.exit("%s: key %s not found" % (src, key))
at += len(needle)
if struct.unpack_from("<I", data, at)[0] != 6:
    sys.exit("%s: key %s is not a float32" % (src, key))
struct.pack_into("<f", data, at + 4, float(value))
open(dst, "wb").write(data)
