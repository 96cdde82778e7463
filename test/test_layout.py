#!/usr/bin/env python3
"""test_layout.py: docs/layout.md is the tree. Its "Layers" table gives every source folder (and each top-level
file) a layer; a file includes only files of its own layer or below (dev/ and test/, which check everything, are
outside the layers). Its file table names every tracked source file of the product, and every path it names exists."""
import fnmatch, os, re, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(root)
passed = failed = 0
def result(ok, what, why=""):
    global passed, failed
    if ok: passed += 1; print(f"PASS {what}")
    else: failed += 1; print(f"FAIL {what}" + (f": {why}" if why else ""))

doc = open("docs/layout.md").read()
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
# untracked files a change is adding count too (a test run before the commit)
tracked += subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], capture_output=True, text=True).stdout.split()
SRC = (".h", ".c", ".cu", ".cuh", ".cpp")
product = sorted(f for f in set(tracked) if f.endswith(SRC) and not f.startswith(("dev/", "test/")) and os.path.exists(f))

def table(title):
    sec = doc[doc.index(title):]
    rows = [l for l in sec.split("\n")[1:] if l.startswith("|")]
    for l in sec.split("\n")[1:]:
        if l.startswith("#"): break
    out = []
    for l in sec.split("\n")[1:]:
        if l.startswith("## "): break
        if l.startswith("|") and not set(l) <= set("|- "): out.append([c.strip() for c in l.strip("|").split("|")])
    return out[1:]  # the header row

# 1. the layers
layers = []  # (number, name, [patterns])
for row in table("## Layers"):
    m = re.match(r"(\d+)\s+(\w+)", row[0])
    pats = re.findall(r"`([^`]+)`", row[1])
    layers.append((int(m.group(1)), m.group(2), pats))
def layer_of(path):
    best = None
    for num, name, pats in layers:
        for p in pats:
            hit = path == p or (p.endswith("/") and path.startswith(p)) or fnmatch.fnmatch(path, p)
            if hit and (best is None or len(p) > best[2]): best = (num, name, len(p))
    return best
unplaced = [f for f in product if layer_of(f) is None]
result(not unplaced, f"every source file of the product has a layer ({len(product)} files, {len(layers)} layers)",
       "no layer for " + ", ".join(unplaced))

# Two includes cross upward until the optimizer boundary (issue 52) lands: the backend's contract takes AdamW's
# settings, and Muon reads the whole TrainConfig. The list only shrinks.
KNOWN_UPWARD = set()
inc = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
upward, unresolved = [], []
for f in product:
    lf = layer_of(f)
    if lf is None: continue
    for target in inc.findall(open(f).read()):
        cand = os.path.normpath(os.path.join(os.path.dirname(f), target))
        t = cand if os.path.exists(cand) else os.path.normpath(target)
        if not os.path.exists(t): unresolved.append(f"{f} -> {target}"); continue
        lt = layer_of(t)
        if lt and lt[0] > lf[0] and f"{f} -> {t}" not in KNOWN_UPWARD: upward.append(f"{f} ({lf[1]}, {lf[0]}) includes {t} ({lt[1]}, {lt[0]})")
result(not upward, "no file includes a file of a layer above its own", "; ".join(upward))
result(not unresolved, "every include names a file of the tree (relative to the file, or to the root)", "; ".join(unresolved))

# 2. the file table: every product file named (a path, or a folder's glob), every path named exists
rows = table("## The files")
named = set()
for row in rows:
    named.update(re.findall(r"`([^`]+)`", row[0]))
missing = [f for f in product if not any(f == p or fnmatch.fnmatch(f, p) or (p.endswith("/") and f.startswith(p)) for p in named)]
result(not missing, f"docs/layout.md's file table names every source file of the product", "not named: " + ", ".join(missing))
ghosts = [p for p in named if not (os.path.exists(p.rstrip("/")) or any(fnmatch.fnmatch(f, p) for f in tracked))]
result(not ghosts, f"every path docs/layout.md's file table names exists ({len(named)} names)", "no such file: " + ", ".join(sorted(ghosts)))
print(f"{passed} passed, {failed} failed, 0 skipped")
sys.exit(1 if failed else 0)
