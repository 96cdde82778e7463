#!/usr/bin/env bash
# test_readme.sh: the README says what the code does. Fails when a flag, a default, a make target, a
# script or a file it names drifts from the code, when an example command uses a flag the trainer
# does not have, or when the default run's example differs from what a real run prints (timings,
# thread counts and memory aside).
source "$(dirname "$0")/lib.sh"
README=README.md
help=$($BIN --help)

# 1. flags: the table and --help list the same flags, with the same defaults
r=$($PY - "$README" <<'PYEOF' "$help"
import re, sys
readme, help_text = open(sys.argv[1]).read(), sys.argv[2]
table = readme[readme.index("## Flags"):readme.index("## Files")]
rows = [l for l in table.splitlines() if l.startswith("| `-")]
doc = {}  # flag -> README default
for row in rows:
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip("|"))]
    for f in re.findall(r"--[a-z0-9-]+", cells[0]):
        doc[f] = cells[1]
helps = {}
for line in help_text.splitlines():
    m = re.match(r"\s+(?:-[a-z], )?\s*(--[a-z0-9-]+)\s+.*?(?:\(default: (.*)\))?$", line)
    if m: helps[m.group(1)] = m.group(2)
problems = []
for f in helps:
    if f not in doc: problems.append(f"{f} is in --help but not in the README's table")
for f in doc:
    if f not in helps: problems.append(f"{f} is in the README's table but not in --help")
def num(x):
    try: return float(x)
    except ValueError: return None
for f, d in helps.items():
    if f not in doc or d is None: continue
    r = doc[f].replace("`", "")
    if num(d) is not None:
        # the README's default must be that number (a table cell may name several flags: take the matching one)
        vals = [num(v.strip()) for v in r.split(",")]
        if num(d) not in vals: problems.append(f"{f}: --help's default {d}, the README's {doc[f]}")
    elif re.split(r"[ ,;]", d)[0] not in r:
        problems.append(f"{f}: --help's default '{d}', the README's {doc[f]}")
print("; ".join(problems) if problems else f"{len(helps)} flags, the same in both, defaults agreeing")
sys.exit(1 if problems else 0)
PYEOF
) && ok "README flag table vs --help: $r" || bad "README flag table vs --help" "$r"

# 2. example commands use only flags the trainer has
r=$($PY - "$README" <<'PYEOF' "$help"
import re, sys
readme, help_text = open(sys.argv[1]).read(), sys.argv[2]
known = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][a-z0-9-]*)", help_text))
blocks = re.findall(r"```\n(.*?)```", readme, re.S)
bad, n = [], 0
for block in blocks:
    for line in block.splitlines():
        cmd = line.split("#")[0]
        m = re.search(r"\./train_gpt(?:_cpu)?\s(.*)|scripts/tinyshakespeare\.sh\s+\S+\s(.*)", cmd)
        if not m: continue
        n += 1
        for flag in re.findall(r"(?<![\w/.'*-])(--?[a-zA-Z][a-z0-9-]*)", m.group(1) or m.group(2)):
            if flag not in known: bad.append(f"{flag} in: {line.strip()}")
print("; ".join(bad) if bad else f"{n} example command lines, every flag known")
sys.exit(1 if bad or n == 0 else 0)
PYEOF
) && ok "README examples: $r" || bad "README example commands use unknown flags" "$r"

# 3. make targets, scripts and files the README names exist, and every script and make target is in it
missing=""
for t in $(grep -oE '`make [a-z][a-z0-9_/-]*' $README | sed 's/`make //' | sort -u) $(grep -oE '^make [a-z][a-z0-9_/-]*' $README | sed 's/make //' | sort -u); do
  grep -qE "^$t:" Makefile || missing="$missing make-$t"
done
for t in $(sed -nE 's/^\.PHONY: *//p' Makefile); do grep -qE "make $t( |\`|$)" $README || missing="$missing undocumented-make-$t"; done
for p in $(grep -oE '(scripts|test|dev)/[A-Za-z0-9_./-]+\.(sh|py|cuh|cu|c|h|txt|png|jsonl)\b' $README | sort -u); do [ -e "$p" ] || missing="$missing $p"; done
for f in scripts/*; do grep -q "$(basename "$f")" $README || missing="$missing undocumented-$f"; done
[ -z "$missing" ] && ok "every make target, script and file the README names exists, and every script and target is in it" \
  || bad "README names that drifted:$missing"

# 4. the default run's example is a real run: every line shown is printed, in order, timings aside
mask() { sed -E 's/[0-9]+ OpenMP threads?/N OpenMP threads/; s/[0-9.]+ ms(\/step)?/T ms\1/g; s/[0-9]+ tok\/s/T tok\/s/g; s/[0-9.]+ GFLOP\/s/F GFLOP\/s/g; s/RSS [0-9]+ MiB/RSS M MiB/g; s/ETA [0-9.dhms]+/ETA E/'; }
example=$(awk '/<!-- README example: the default run/{f=1; next} f && /^```$/{n++; if (n==2) exit; next} f && n==1' $README | mask)
actual=$($BIN 2>&1 | mask)
r=$($PY - <<'PYEOF' "$example" "$actual"
import sys
want = [l for l in sys.argv[1].splitlines() if l.strip() != "..."]
got = sys.argv[2].splitlines()
i = 0
for w in want:
    while i < len(got) and got[i] != w: i += 1
    if i == len(got): print(f"not printed (in this order): {w}"); sys.exit(1)
    i += 1
print(f"{len(want)} lines")
PYEOF
)
[ -n "$example" ] && [ $? -eq 0 ] && grep -q "lines$" <<<"$r" && ok "the README's default-run example is what the run prints: $r" \
  || bad "README's default-run example vs a real run" "$r"
finish
