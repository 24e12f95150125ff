#!/usr/bin/env python3
"""svg_check.py SVG [--font TTF] [--min-distance D] [--browser-boxes DOM]: is plan-dump's SVG
picture readable?  svg_check.py --html HTML SVG: writes HTML for a browser to measure SVG's texts.

Standard library only. From the SVG's own coordinates and font sizes, with the advance widths of
the font a browser draws it in (the TrueType file: --font, else fc-match's sans-serif, else
DejaVu Sans at its Debian path; bold text measured in the bold face, from fc-match
"sans-serif:bold" or the regular file's name with "-Bold"), every <text> element gets a box:
baseline y, ascent 0.93 em, descent 0.24 em, its width the sum of the glyphs' advances (an upward
text, transform="translate(x,y) rotate(-90)", the box turned). Checks, one failure line each:
  - every text box lies within the canvas (width x height of the <svg>);
  - no two text boxes overlap (more than 0.5 px in both directions);
  - a text whose anchor lies inside a drawn <rect> (not the background, not a legend swatch) lies
    within that rect (a label in a cell);
  - a text that ends with an ellipsis (U+2026) carries a <title> child that starts with its
    visible part (the full name on hover);
  - the swatches (class="swatch") of each legend (data-legend) have distinct fills, at least
    --min-distance (default 40) apart in RGB, and one fill never stands for two names (a swatch's
    name: its <title> up to ": " or " (") across the legends.
With --browser-boxes the text boxes are a browser's instead (getBoundingClientRect of each <text>
relative to the <svg>): DOM is what `chromium --headless --dump-dom file://HTML` printed for the
page that --html wrote (the SVG inline and a script that lists the boxes in <pre id="boxes">).
Prints "texts N (T truncated with titles), legends L with E entries (C colours, closest D apart)"
and exits 0, or the failures (at most 20) and exits 1.
"""
import json
import math
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
ASCENT, DESCENT = 0.93, 0.24
ELLIPSIS = "\u2026"


def font_widths(path):
    """{codepoint: advance in em} for the characters of a TrueType file's (3, 1) cmap subtable."""
    d = open(path, "rb").read()
    tables = {}
    for i in range(struct.unpack(">H", d[4:6])[0]):
        tag, _, off, _ = struct.unpack(">4sIII", d[12 + 16 * i:28 + 16 * i])
        tables[tag] = off
    upem = struct.unpack(">H", d[tables[b"head"] + 18:tables[b"head"] + 20])[0]
    n_hmetrics = struct.unpack(">H", d[tables[b"hhea"] + 34:tables[b"hhea"] + 36])[0]
    cmap = tables[b"cmap"]
    sub = None
    for i in range(struct.unpack(">H", d[cmap + 2:cmap + 4])[0]):
        platform, encoding, off = struct.unpack(">HHI", d[cmap + 4 + 8 * i:cmap + 12 + 8 * i])
        if platform == 3 and encoding == 1:
            sub = cmap + off
    if sub is None or struct.unpack(">H", d[sub:sub + 2])[0] != 4:
        raise ValueError("%s: no format-4 Unicode cmap" % path)
    seg2 = struct.unpack(">H", d[sub + 6:sub + 8])[0]
    n = seg2 // 2
    ends = struct.unpack(">%dH" % n, d[sub + 14:sub + 14 + seg2])
    base = sub + 16 + seg2
    starts = struct.unpack(">%dH" % n, d[base:base + seg2])
    deltas = struct.unpack(">%dh" % n, d[base + seg2:base + 2 * seg2])
    range_at = base + 2 * seg2
    range_offsets = struct.unpack(">%dH" % n, d[range_at:range_at + seg2])

    def glyph(ch):
        for i in range(n):
            if starts[i] <= ch <= ends[i]:
                if range_offsets[i] == 0:
                    return (ch + deltas[i]) & 0xFFFF
                a = range_at + 2 * i + range_offsets[i] + 2 * (ch - starts[i])
                g = struct.unpack(">H", d[a:a + 2])[0]
                return (g + deltas[i]) & 0xFFFF if g else 0
        return 0

    hmtx = tables[b"hmtx"]
    out = {}
    for ch in list(range(32, 127)) + [0x2026]:
        g = min(glyph(ch), n_hmetrics - 1)
        out[ch] = struct.unpack(">H", d[hmtx + 4 * g:hmtx + 4 * g + 2])[0] / upem
    return out


def find_font(pattern, fallback):
    try:
        path = subprocess.run(["fc-match", "-f", "%{file}", pattern], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        if path and os.path.exists(path):
            return path
    except (OSError, subprocess.SubprocessError):
        pass
    return fallback


def text_of(el):
    """The visible characters of a <text>: its own text, not its <title>."""
    return el.text or ""


def box(el, widths):
    size = float(el.get("font-size", "16"))
    t = text_of(el)
    w = sum(widths.get(ord(c), widths[ord("?")]) for c in t) * size
    tr = el.get("transform")
    if tr:
        if "rotate(-90)" not in tr or not tr.startswith("translate("):
            raise ValueError("unsupported transform %r" % tr)
        x, y = (float(v) for v in tr[len("translate("):tr.index(")")].split(","))
        return (x - ASCENT * size, y - w, x + DESCENT * size, y)
    x, y = float(el.get("x")), float(el.get("y"))
    return (x, y - ASCENT * size, x + w, y + DESCENT * size)


HTML_SCRIPT = """<script>
const svg = document.querySelector("svg"), at = svg.getBoundingClientRect(), boxes = [];
for (const t of svg.querySelectorAll("text")) {
  const r = t.getBoundingClientRect();
  boxes.push([r.left - at.left, r.top - at.top, r.right - at.left, r.bottom - at.top]);
}
const pre = document.createElement("pre");
pre.id = "boxes";
pre.textContent = JSON.stringify(boxes);
document.body.appendChild(pre);
</script>"""


def write_html(out, svg_path):
    svg = open(svg_path, encoding="utf-8").read()
    if svg.startswith("<?xml"):
        svg = svg[svg.index("?>") + 2:]
    with open(out, "w", encoding="utf-8") as f:
        f.write('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">' + svg +
                HTML_SCRIPT + "</body></html>\n")


def browser_boxes(dom_path):
    dom = open(dom_path, encoding="utf-8").read()
    begin = dom.find('<pre id="boxes">')
    if begin < 0:
        raise ValueError("%s: no <pre id=\"boxes\"> (did the page's script run?)" % dom_path)
    begin += len('<pre id="boxes">')
    return [tuple(b) for b in json.loads(dom[begin:dom.index("</pre>", begin)])]


def rgb(fill):
    return tuple(int(fill[k:k + 2], 16) for k in (1, 3, 5))


def main():
    args = sys.argv[1:]
    if args[0] == "--html":
        write_html(args[1], args[2])
        return 0
    path = args[0]
    measured = None
    font = bold_font = None
    min_distance = 40.0
    for i, a in enumerate(args):
        if a == "--font":
            font = args[i + 1]
        elif a == "--min-distance":
            min_distance = float(args[i + 1])
        elif a == "--browser-boxes":
            measured = browser_boxes(args[i + 1])
    if font is None:
        font = find_font("sans-serif", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
        bold_font = find_font("sans-serif:bold", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
    else:
        bold_font = font.replace(".ttf", "-Bold.ttf") if os.path.exists(font.replace(".ttf", "-Bold.ttf")) else font
    regular, bold = font_widths(font), font_widths(bold_font)

    root = ET.parse(path).getroot()
    width, height = float(root.get("width")), float(root.get("height"))
    fails = []
    texts = []
    truncated = 0
    elements = list(root.iter(NS + "text"))
    if measured is not None and len(measured) != len(elements):
        print("FAIL the browser measured %d texts, the SVG has %d" % (len(measured), len(elements)))
        return 1
    for k, el in enumerate(elements):
        b = measured[k] if measured is not None else box(el, bold if el.get("font-weight") == "bold" else regular)
        t = text_of(el)
        texts.append((b, t))
        if b[0] < -0.5 or b[1] < -0.5 or b[2] > width + 0.5 or b[3] > height + 0.5:
            fails.append("text %r at (%.1f, %.1f)-(%.1f, %.1f) leaves the %gx%g canvas" % (t, *b, width, height))
        if t.endswith(ELLIPSIS):
            title = el.find(NS + "title")
            if title is None or not (title.text or "").startswith(t[:-1]):
                fails.append("text %r is cut without a <title> carrying its whole text" % t)
            else:
                truncated += 1
    for i in range(len(texts)):
        a, ta = texts[i]
        for j in range(i + 1, len(texts)):
            b, tb = texts[j]
            if min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5:
                fails.append("texts %r and %r overlap" % (ta, tb))

    # Labels in cells: a text anchored inside a drawn rect stays inside it.
    cells = []
    for r in root.iter(NS + "rect"):
        if r.get("x") is None or r.get("class") == "swatch" or r.get("fill") == "none":
            continue
        x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
        cells.append((x, y, x + w, y + h))
    for b, t in texts:
        ax, ay = b[0], (b[1] + b[3]) / 2
        for c in cells:
            if c[0] < ax < c[2] and c[1] < ay < c[3]:
                if b[0] < c[0] - 0.5 or b[2] > c[2] + 0.5 or b[1] < c[1] - 0.5 or b[3] > c[3] + 0.5:
                    fails.append("text %r (%.1f, %.1f)-(%.1f, %.1f) leaves its cell (%.1f, %.1f)-(%.1f, %.1f)" %
                                 (t, *b, *c))
                break

    # Legends: one colour per entry.
    legends = {}
    names_of = {}
    for el in root.iter(NS + "rect"):
        if el.get("class") != "swatch" or el.get("fill") == "none":
            continue
        title = el.find(NS + "title")
        name = (title.text or "") if title is not None else ""
        name = name.split(": ")[0].split(" (")[0]
        fill = el.get("fill").lower()
        legends.setdefault(el.get("data-legend"), []).append((fill, name))
        names_of.setdefault(fill, set()).add(name)
    closest = math.inf
    n_entries = 0
    for legend, entries in legends.items():
        n_entries += len(entries)
        for i in range(len(entries)):
            for j in range(i + 1, len(entries)):
                (fa, na), (fb, nb) = entries[i], entries[j]
                d = math.dist(rgb(fa), rgb(fb))
                closest = min(closest, d)
                if d < min_distance:
                    fails.append("legend %s: %s (%s) and %s (%s) are %.1f apart, expected at least %g" %
                                 (legend, na, fa, nb, fb, d, min_distance))
    for fill, names in names_of.items():
        if len(names) > 1:
            fails.append("colour %s stands for %s" % (fill, ", ".join(sorted(names))))
    if fails:
        for f in fails[:20]:
            print("FAIL " + f)
        if len(fails) > 20:
            print("FAIL ... %d more" % (len(fails) - 20))
        return 1
    print("texts %d (%d truncated with titles), legends %d with %d entries (%d colours, closest %.0f apart)" %
          (len(texts), truncated, len(legends), n_entries, len(names_of), closest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
