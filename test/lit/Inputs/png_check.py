#!/usr/bin/env python3
"""png_check.py PNG [--color RRGGBB:MIN ...]: is a screenshot a rendered picture, not a blank page?

Decodes an 8-bit, non-interlaced greyscale/RGB/RGBA PNG (what Chromium's --screenshot writes) with
the standard library only, and prints one line:
  "png WxH, N distinct colours, F% not white, luma stddev S, RRGGBB: K pixels ..."
Exit status 1 (with the reason on that line) when the image is blank: fewer than 8 distinct colours,
less than 1% of the pixels not white, or a luma standard deviation below 5; or when a --color
RRGGBB:MIN asks for at least MIN pixels of exactly that colour (a colour the SVG draws) and there
are fewer.
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, w, h, depth, ctype, interlace = 8, b"", 0, 0, 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    channels = {0: 1, 2: 3, 6: 4, 4: 2}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, ctype, interlace))
    raw = zlib.decompress(idat)
    stride = w * channels
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, channels, out


def main():
    args = sys.argv[1:]
    path = args[0]
    want = []
    for i, a in enumerate(args):
        if a == "--color":
            hexrgb, minimum = args[i + 1].split(":")
            want.append((tuple(int(hexrgb[k:k + 2], 16) for k in (0, 2, 4)), int(minimum), hexrgb))
    w, h, ch, px = decode(path)
    counts = {}
    n = w * h
    for i in range(0, len(px), ch):
        rgb = bytes(px[i:i + 3]) if ch >= 3 else bytes([px[i]] * 3)
        counts[rgb] = counts.get(rgb, 0) + 1
    white = counts.get(b"\xff\xff\xff", 0)
    s = s2 = 0.0
    for rgb, k in counts.items():
        luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
        s += luma * k
        s2 += luma * luma * k
    mean = s / n
    std = max(s2 / n - mean * mean, 0.0) ** 0.5
    line = "png %dx%d, %d distinct colours, %.1f%% not white, luma stddev %.1f" % (
        w, h, len(counts), 100.0 * (n - white) / n, std)
    bad = []
    for rgb, minimum, name in want:
        k = counts.get(bytes(rgb), 0)
        line += ", %s: %d pixels" % (name, k)
        if k < minimum:
            bad.append("fewer than %d pixels of %s" % (minimum, name))
    if len(counts) < 8 or (n - white) < n // 100 or std < 5:
        bad.append("blank")
    print(line + ("" if not bad else " -- " + "; ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
