#!/usr/bin/env python3
"""Generates pretokenizer_cases.txt: expected word splits of the BPE pre-tokenizer regexes.

An independent oracle for runtime/src/tokenizer/pre_tokenizer.cpp: the regexes of llama.cpp's
llm_tokenizer_bpe, run with Python's `re` (backtracking, leftmost alternative, like the ECMAScript
std::regex llama.cpp falls back to) on random strings over a fixed alphabet. \\p{L}, \\p{N}, \\p{P}
and \\s become explicit character classes over that alphabet (unicodedata general categories; \\s =
the White_Space property). Each regex of a list splits every word of the previous one; text
between matches is a word of its own (llama.cpp unicode_regex_split).

Usage: python3 gen_pretokenizer_cases.py > pretokenizer_cases.txt
Line format: <pre-tokenizer> <input as UTF-8 hex> <words as UTF-8 hex, comma-separated>
"""
import random
import re
import unicodedata

ALPHABET = [chr(c) for c in [
    0x61, 0x5A, 0x65, 0x73, 0x74, 0x6C, 0x64, 0x6D, 0x72, 0x76, 0x53, 0x54, 0x30, 0x33, 0x39, 0x27,
    0x22, 0x20, 0x20, 0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C, 0x21, 0x3F, 0x2E, 0x2C, 0x28, 0x3C, 0x7C,
    0x3E, 0x24, 0x2B, 0x5E, 0x7E, 0x60, 0x5F, 0x23, 0x00, 0x01, 0x7F, 0x85, 0xA0, 0xBD, 0xC4, 0xE9,
    0x301, 0x308, 0x430, 0x44F, 0x1780, 0x17B6, 0x3000, 0x2028, 0x200D, 0xFE0F, 0x4E00, 0x6211,
    0xFF5E, 0x1F680, 0x1F999, 0xE000, 0x10FFFF, 0x0378, 0x2160, 0xB2, 0x660, 0x2581, 0xFF10, 0x41, 0x42, 0x51, 0x63, 0xC9, 0xDF, 0x2F, 0x2F, 0x3042, 0x30A2, 0xAC00, 0x0800, 0x9FA6, 0x5B, 0x5C, 0x40, 0x2026, 0x3002, 0xFF0C, 0x0964, 0x060C, 0x29]]
WHITE_SPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
               0x205F, 0x3000} | set(range(0x2000, 0x200B))


# Every character a case can contain: the alphabet and all of ASCII (the fixed cases).
CHARS = sorted(set(ALPHABET) | {chr(c) for c in range(128)})


def cls(pred):
    return "".join(re.escape(c) for c in CHARS if pred(c))


L = cls(lambda c: unicodedata.category(c)[0] == "L")
N = cls(lambda c: unicodedata.category(c)[0] == "N")
P = cls(lambda c: unicodedata.category(c)[0] == "P")
S = cls(lambda c: ord(c) in WHITE_SPACE)
M = cls(lambda c: unicodedata.category(c)[0] == "M")
SYM = cls(lambda c: unicodedata.category(c)[0] == "S")

GPT2 = rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])"
CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"


def llama3(digits):
    return (CONTRACTIONS + rf"|[^\r\n{L}{N}]?[{L}]+|[{N}]{digits}| ?[^{S}{L}{N}]+[\r\n]*"
            rf"|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")


# llama.cpp's adapted GPT-4o / Tekken regexes: "upper" = (?=[\p{L}])([^a-z]),
# "lower" = (?=[\p{L}])([^A-Z]).
UP = rf"(?:(?=[{L}])[^a-z])"
LO = rf"(?:(?=[{L}])[^A-Z])"
GPT4O = (rf"[^\r\n{L}{N}]?{UP}*{LO}+{CONTRACTIONS}?|[^\r\n{L}{N}]?{UP}+{LO}*{CONTRACTIONS}?"
         rf"|[{N}]{{1,3}}| ?[^{S}{L}{N}]+[\r\n/]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")
TEKKEN = (rf"[^\r\n{L}{N}]?{UP}*{LO}+|[^\r\n{L}{N}]?{UP}+{LO}*"
          rf"|[{N}]| ?[^{S}{L}{N}]+[\r\n/]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")

LISTS = {
    "gpt2": [GPT2],
    "llama3": [llama3("{1,3}")],
    "qwen2": [llama3("")],
    "default": [rf"[{P}\$\+<=>\^~\|]+", GPT2, rf"[{N}]+", r"[0-9][0-9][0-9]"],
    "starcoder": [rf"[{N}]", GPT2],
    "falcon": [rf"[{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "gpt4o": [GPT4O],
    "deepseek3": [rf"[{N}]{{1,3}}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                  r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
                  rf"|[^\r\n{L}{P}{SYM}]?[{L}{M}]+| ?[{P}{SYM}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"],
    # llama.cpp runs the literal-range class through std::wregex after replacing every non-ASCII
    # White_Space code point by U+000B (unicode_regex_split), so the class never matches them.
    "deepseek_coder": [r"[\r\n]", rf"[{S}]?[{L}]+", rf"[{S}]?[{P}]+",
                       "[" + cls(lambda c: ord(c) not in WHITE_SPACE and (0x4E00 <= ord(c) <= 0x9FA5 or 0x0800 <= ord(c) <= 0x4E00
                                                                       or 0xAC00 <= ord(c) <= 0xD7FF)) + "]+", rf"[{N}]"],
    "tekken": [TEKKEN],
    "qwen35": [CONTRACTIONS + rf"|[^\r\n{L}{N}]?[{L}{M}]+|[{N}]| ?[^{S}{L}{M}{N}]+[\r\n]*"
               rf"|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"],
    "seed_coder": [CONTRACTIONS + rf"|[^\r\n{L}{N}]?[{L}]+|[{N}]{{1}}| ?[^{S}{L}{N}\r\n]+"
                   rf"|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"],
    "ufakzeka": [rf"[^\r\n{L}{N}]?[{L}]+|[{N}]| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+"],
    "laguna": [r"[^\n]+|[\n]+", llama3("")],
    "minicpm5": [rf"[{N}]{{1,3}}", llama3("+")],
    "bloom": [" ?[^(" + S + "|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"],
    "viking": [" ?[^(" + S + "|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+", rf"[{N}]"],
}


def split(text, regexes):
    words = [text] if text else []
    for rx in regexes:
        pattern = re.compile(rx)
        out = []
        for w in words:
            last = 0
            for m in pattern.finditer(w):
                if m.start() > last:
                    out.append(w[last:m.start()])
                out.append(m.group())
                last = m.end()
            if last < len(w):
                out.append(w[last:])
        words = out
    return words


def hexs(s):
    return s.encode("utf-8", "surrogatepass").hex()


def main():
    rng = random.Random(20261130)
    fixed = ["", " ", "  ", "   Hello", "Hello world", "I'm", "y'ALL'S", "1234567", " 12 345\n\n\n  x",
             "\t\tx", "a  \n  b", "!!!  ", "\u3000\u3000x", "3333333333", "HelloWorld", "HTTPServer's",
             "\u00c9COLE\u00e9t\u00e9 ABC\u00e9DEF", "a/b//\n", "iPhone XR", "'S'", "\u00e9AB C"]
    for name, regexes in LISTS.items():
        cases = fixed + ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 25)))
                         for _ in range(150)]
        for text in cases:
            assert all(c in CHARS for c in text)
            words = split(text, regexes)
            assert "".join(words) == text
            print(name, hexs(text) or "-", ",".join(hexs(w) for w in words) or "-")


if __name__ == "__main__":
    main()
