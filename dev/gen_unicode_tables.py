#!/usr/bin/env python3
"""
Generates the Unicode range tables used by tokenizer.h's hand-written GPT-2
pre-tokeniser and writes them between the BEGIN/END GENERATED UNICODE TABLES
markers in tokenizer/tokenizer_tables.h (in place; the rest of the file is left alone).

The regex being emulated is tiktoken's gpt2 pattern
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
so three classes are needed:
  TOK_L  = general category L* (Lu Ll Lt Lm Lo)   -> \\p{L}
  TOK_N  = general category N* (Nd Nl No)         -> \\p{N}
  TOK_WS = the Unicode White_Space property       -> \\s (Rust regex is Unicode-aware)
Python's unicodedata has no White_Space property, but in every Unicode version
since 6.3 White_Space is exactly Zs + Zl + Zp + U+0009..U+000D + U+0085, which is
what we use (and check against the known list of 25 code points).

The data comes from Python's unicodedata, so the Unicode version is that of the
Python running this script (printed into the table). tiktoken's regex crate may be
on a newer Unicode version; characters assigned after ours are then classed as
"other" here. Regenerate with a newer Python to catch up.

Usage: python3 dev/gen_unicode_tables.py [--header tokenizer/tokenizer_tables.h] [--check]
"""
import argparse
import os
import sys
import unicodedata

BEGIN = "// BEGIN GENERATED UNICODE TABLES (dev/gen_unicode_tables.py; do not edit by hand)\n"
END = "// END GENERATED UNICODE TABLES\n"

# White_Space as listed in PropList.txt (stable since Unicode 6.3)
WHITE_SPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
               0x2028, 0x2029, 0x202F, 0x205F, 0x3000}


def classify(cp):
    cat = unicodedata.category(chr(cp))
    if cat in ("Zs", "Zl", "Zp") or 0x09 <= cp <= 0x0D or cp == 0x85:
        return "TOK_WS"
    if cat[0] == "L":
        return "TOK_L"
    if cat[0] == "N":
        return "TOK_N"
    return None


def build_ranges():
    ranges = []  # [lo, hi, cls], adjacent ranges of the same class merged
    for cp in range(0x110000):
        cls = classify(cp)
        if cls is None:
            continue
        if ranges and ranges[-1][2] == cls and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, cls])
    ws = {cp for lo, hi, c in ranges if c == "TOK_WS" for cp in range(lo, hi + 1)}
    assert ws == WHITE_SPACE, "White_Space derivation no longer matches PropList.txt"
    return ranges


def render(ranges):
    counts = {c: sum(hi - lo + 1 for lo, hi, cc in ranges if cc == c) for c in ("TOK_L", "TOK_N", "TOK_WS")}
    out = [BEGIN]
    out.append("// Unicode %s (Python %d.%d unicodedata): %d ranges; %d letters, %d numbers, %d white space.\n"
               % (unicodedata.unidata_version, sys.version_info[0], sys.version_info[1], len(ranges),
                  counts["TOK_L"], counts["TOK_N"], counts["TOK_WS"]))
    out.append('#define TOK_UNICODE_VERSION "%s"\n' % unicodedata.unidata_version)
    out.append("static const TokUniRange tok_uni_ranges[] = {\n")
    per_line = 4
    for k in range(0, len(ranges), per_line):
        items = ["{0x%05X, 0x%05X, %-6s}" % (lo, hi, cls) for lo, hi, cls in ranges[k:k + per_line]]
        out.append("    " + ", ".join(items) + ",\n")
    out.append("};\n")
    out.append("static const size_t tok_uni_nranges = sizeof(tok_uni_ranges) / sizeof(tok_uni_ranges[0]);\n")
    out.append(END)
    return "".join(out)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header", default=os.path.join(root, "tokenizer", "tokenizer_tables.h"), help="header to update in place")
    ap.add_argument("--check", action="store_true", help="only check that the header is up to date")
    args = ap.parse_args()

    with open(args.header, encoding="utf-8") as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        sys.exit("%s: expected exactly one BEGIN/END GENERATED UNICODE TABLES marker pair" % args.header)
    a = text.index(BEGIN)
    b = text.index(END) + len(END)
    new = text[:a] + render(build_ranges()) + text[b:]
    if args.check:
        if new != text:
            sys.exit("%s: Unicode tables are out of date (or from another Unicode version); rerun %s"
                     % (args.header, os.path.relpath(__file__)))
        print("%s: Unicode tables up to date" % args.header)
        return
    if new != text:
        tmp = args.header + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, args.header)
    print("%s: wrote Unicode %s tables" % (args.header, unicodedata.unidata_version))


if __name__ == "__main__":
    main()
