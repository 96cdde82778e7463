#!/usr/bin/env bash
# test_readme.sh: the README and docs/*.md say what the code does. Fails when a flag, a default, a make
# target, a script, a file, an environment variable, a link or a file format they name drifts from the
# code; when a command in their code blocks is one this test cannot check, or gives a flag its program
# does not have; or when an output shown as a real run's differs from what the run prints (timings,
# thread counts and memory aside). Code blocks are tagged: ```sh holds commands (every line is checked),
# ```text holds output (lines starting with "$ " are commands, and are checked too). An output block right
# after <!-- output of: CMD --> is CMD's real output, line for line ("..." skips lines); one that does not open
# with "..." shows the run from its start, so it has a line of every kind the run prints (by prefix: "model:",
# "memory per rank:", "step", ...). And what the docs say the program does (a final checkpoint with -o alone, what the
# checkpoint line names, --dry-run allocating nothing, -o left unmade by an error at start, the shards summary's
# resume figure) is done: each claim is found in its doc and checked on a real run (7).
source "$(dirname "$0")/lib.sh"

# the CUDA build's --help too, when one is built here (make test builds ./train_gpt_emu where the toolkit's
# headers are, and make builds ./train_gpt where nvcc is)
CUDA_BIN=""
for b in ./train_gpt ./train_gpt_emu; do
  if [ -x "$b" ] && $b --help 2>/dev/null | grep -q "cuda build"; then CUDA_BIN=$b; break; fi
done

# one small run whose files and log the format checks read: a model and state file, and every kind of log line
$BIN -x 2 -v 1 -s 0 -o "$W/run" -n 2 --log "$W/run/log.jsonl" >"$W/run.out" 2>&1 || { cat "$W/run.out"; }

$PY - "$BIN" "$CUDA_BIN" "$W" >"$W/results" <<'PYEOF'
import glob, json, os, re, shlex, struct, subprocess, sys, traceback
BIN, CUDA_BIN, W = sys.argv[1], sys.argv[2], sys.argv[3]
DOCS = ["README.md"] + sorted(glob.glob("docs/*.md"))
text = {f: open(f).read() for f in DOCS}
readme = text["README.md"]
def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)
class MissingDependency(Exception): pass  # an optional package this Python lacks: the check is a SKIP naming it

def result(ok, msg, detail=""):
    print(json.dumps({"ok": ok, "msg": msg, "detail": detail}))

# fenced blocks: (file, line, tag, [lines]); a block may be indented (inside a list item)
def blocks(f):
    out, cur = [], None
    for i, l in enumerate(text[f].split("\n")):
        m = re.match(r"^(\s*)```(\w*)\s*$", l)
        if m and cur is None: cur = (f, i + 1, m.group(2), [], len(m.group(1)))
        elif m and cur is not None: out.append(cur[:4]); cur = None
        elif cur is not None: cur[3].append(l[cur[4]:] if l[:cur[4]].strip() == "" else l)
    return out
ALL_BLOCKS = [b for f in DOCS for b in blocks(f)]

def help_flags(help_text):
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)", help_text))
trainer_help = run([BIN, "--help"]).stdout
cuda_help = run([CUDA_BIN, "--help"]).stdout if CUDA_BIN else ""

# 1. flags: the README's table and each build's --help list the same flags, with the same defaults
def check_flags():
    table = readme[readme.index("## Flags"):]
    table = table[:table.index("\n## ")]
    doc = {}
    for row in (l for l in table.splitlines() if l.startswith("| `-")):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip("|"))]
        for f in re.findall(r"--[a-z0-9-]+", cells[0]): doc[f] = cells[1]
    builds = [("cpu build", trainer_help)] + ([(f"cuda build ({CUDA_BIN})", cuda_help)] if CUDA_BIN else [])
    problems, n = [], 0
    def num(x):
        try: return float(x)
        except ValueError: return None
    for name, h in builds:
        helps = {}
        for line in h.splitlines():
            m = re.match(r"\s+(?:-[a-z], )?\s*(--[a-z0-9-]+)\s+.*?(?:\(default: (.*)\))?$", line)
            if m: helps[m.group(1)] = m.group(2)
        n = len(helps)
        for f in helps:
            if f not in doc: problems.append(f"{name}: {f} is in --help but not in the README's table")
        for f in doc:
            if f not in helps: problems.append(f"{name}: {f} is in the README's table but not in --help")
        for f, d in helps.items():
            if f not in doc or d is None: continue
            r = doc[f].replace("`", "")
            if num(d) is not None:
                if num(d) not in [num(v.strip()) for v in r.split(",")]:
                    problems.append(f"{name}: {f}: --help's default {d}, the README's {doc[f]}")
            elif re.split(r"[ ,;]", d)[0] not in r:
                problems.append(f"{name}: {f}: --help's default '{d}', the README's {doc[f]}")
    which = "cpu build" + (f" and cuda build, {CUDA_BIN}" if CUDA_BIN else "; no CUDA build here to ask")
    msg = f"README flag table vs --help: {n} flags, the same in both, defaults agreeing"
    result(not problems, msg + f" ({which})", "; ".join(problems))
    return msg + f" ({which})"

# 2. every command in a code block is one this test knows, and every flag it gives is its program's
makefile = open("Makefile").read()
def make_target(t):
    return re.search(r"^(?:[^\s:#=]+\s+)*" + re.escape(t) + r"(?:\s+[^\s:#=]+)*\s*:(?!=)", makefile, re.M) is not None
script_help = {}
def py_flags(path):
    if path not in script_help:
        r = run([sys.executable, path, "--help"])
        if r.returncode != 0 and "needs numpy" in r.stderr: raise MissingDependency(f"{path} --help: {r.stderr.strip()}")
        if r.returncode != 0: raise RuntimeError(f"{path} --help failed: {r.stderr.strip()[-300:]}")
        script_help[path] = help_flags(r.stdout)
    return script_help[path]
tokenize_help = run(["./tokenize", "--help"]).stdout
recipes = open("scripts/gpt2_recipes.sh").read()
TRAINERS = ("./train_gpt", "./train_gpt_cpu", "./train_gpt_emu")
UTILITIES = {"pip", "git", "cat", "zcat", "cd", "ls", "curl", "wget", "mkdir", "echo", "head", "cmp", "diff", "huggingface-cli"}  # not ours: nothing of ours to check
def flags_in(args):
    out = []
    for a in args:
        a = a.strip("[]")
        if re.match(r"^--?[a-zA-Z][a-zA-Z0-9-]*(=.*)?$", a): out.append(a.split("=")[0])
    return out
def check_command(words, env, problems, where, inline=False):
    if not words: return
    for k, v in env:
        if k.startswith("TRAIN_GPT_") and k not in SOURCE_VARS: problems.append(f"{where}: no such variable {k}")
        if k == "EXTRA_ARGS": unknown(flags_in(shlex.split(v)), help_flags(trainer_help), where, problems)
        if k == "RECIPE" and v != "none" and f'{v})' not in recipes: problems.append(f"{where}: no recipe {v} in scripts/gpt2_recipes.sh")
        if k == "TRAIN_BIN" and not v.startswith("./train_gpt"): problems.append(f"{where}: TRAIN_BIN={v}")
    prog, args = words[0], words[1:]
    if re.search(r"(^|/)python3?$", prog) and args and args[0] == "-c": return  # inline Python: nothing of ours
    if (prog in ("bash", "nice") or re.search(r"(^|/)python3?$", prog)) and args: prog, args = args[0], args[1:]
    if prog == "make":
        for t in args:
            if "=" not in t and not make_target(t): problems.append(f"{where}: no make target {t}")
    elif prog in TRAINERS:
        unknown(flags_in(args), help_flags(trainer_help), where, problems)
    elif prog == "mpirun":
        i = next((k for k, a in enumerate(args) if a in TRAINERS), None)
        if i is None: problems.append(f"{where}: mpirun of no trainer")
        else: unknown(flags_in(args[i + 1:]), help_flags(trainer_help), where, problems)
    elif prog == "sbatch":
        s = next((a for a in args if a.startswith("scripts/")), None)
        if (s or not inline) and (not s or not os.path.exists(s)): problems.append(f"{where}: sbatch of no script of ours")
    elif prog == "./tokenize":
        if (args or not inline) and (not args or args[0] not in ("encode", "decode", "shards", "--help")): problems.append(f"{where}: no tokenize subcommand")
        unknown(flags_in(args[1:]), help_flags(tokenize_help), where, problems)
    elif re.match(r"^(\./)?(scripts|dev|test)/", prog):
        path = prog[2:] if prog.startswith("./") else prog
        if not os.path.exists(path) and not make_target(path): problems.append(f"{where}: no {path}")
        elif path.endswith(".py"): unknown(flags_in(args), py_flags(path), where, problems)
        elif path in ("scripts/tinyshakespeare.sh", "scripts/run_node.sh"):
            if path == "scripts/run_node.sh" and args and args[0] != "none" and f"{args[0]})" not in recipes and not (inline and args[0].isupper()):
                problems.append(f"{where}: no recipe {args[0]} in scripts/gpt2_recipes.sh")
            unknown(flags_in(args), help_flags(trainer_help), where, problems)
    elif prog in UTILITIES:
        pass
    else:
        problems.append(f"{where}: a command this test cannot check: {' '.join(words)}")
def unknown(flags, known, where, problems):
    for f in flags:
        if f not in known: problems.append(f"{where}: {f} is not a flag of its program")
def split_command(line):
    lex = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    toks, segs, cur, skip = list(lex), [], [], False
    for t in toks:
        if skip: skip = False; continue
        if t in ("|", "&&", "||", ";"): segs.append(cur); cur = []
        elif t in ("<", ">", ">>", "2>", "&>"): skip = True
        else: cur.append(t)
    segs.append(cur)
    out = []
    for seg in segs:
        env = []
        while seg and re.match(r"^[A-Z_][A-Z0-9_]*=", seg[0]): k, v = seg.pop(0).split("=", 1); env.append((k, v))
        out.append((seg, env))
    return out
def commands():
    for f, line0, tag, lines in ALL_BLOCKS:
        joined, start = "", None
        for k, l in enumerate(lines):
            if tag == "text":
                if not l.startswith("$ "): continue
                l = l[2:]
            elif tag != "sh": break
            if start is None: start = line0 + 1 + k
            if l.rstrip().endswith("\\"): joined += l.rstrip()[:-1] + " "; continue
            joined += l
            if joined.strip(): yield f"{f}:{start}", joined
            joined, start = "", None
def check_commands():
    problems, n = [], 0
    untagged = [f"{f}:{l}" for f, l, tag, _ in ALL_BLOCKS if tag not in ("sh", "text")]
    if untagged: problems.append("code blocks neither ```sh nor ```text: " + ", ".join(untagged))
    for where, line in commands():
        n += 1
        try:
            for words, env in split_command(line): check_command(words, env, problems, where)
        except ValueError as e: problems.append(f"{where}: cannot parse ({e}): {line}")
    # commands quoted in the prose too: a code span that starts with one of our programs
    m_inline = 0
    for f in DOCS:
        body = re.sub(r"```.*?```", "", text[f], flags=re.S)
        for span in (re.sub(r"\s+", " ", x) for x in re.findall(r"`([^`]+)`", body)):
            if not re.match(r"^(\./train_gpt|\./tokenize |scripts/|\./dev/|make |sbatch |python3 scripts/)", span): continue
            try: words = shlex.split(span)
            except ValueError: continue
            m_inline += 1
            check_command([w for w in words if w != "..."], [], problems, f"{f} (in the text)", inline=True)
    result(not problems and n > 0, f"{n} commands in the code blocks of README.md and docs/*.md ({len(DOCS) - 1} pages) and {m_inline} in their text, each checked: its program exists and knows every flag given", "; ".join(problems))

# 3. names: make targets, scripts, files and TRAIN_GPT_* variables exist, and every script and target is named
tracked = run(["git", "ls-files"]).stdout.split()
SOURCE_VARS = set()
for p in tracked:
    if p.endswith(".md") or not os.path.isfile(p): continue
    try: SOURCE_VARS |= set(re.findall(r"TRAIN_GPT_[A-Z0-9_]+", open(p, errors="replace").read()))
    except OSError: pass
basenames = {os.path.basename(p) for p in tracked} | {os.path.basename(p) for p in glob.glob("**/*", recursive=True)}
EXTERNAL = {"cuda_bf16.h", "cuda_fp16.h", "cudnn.h", "train_gpt2.cu", "train_llama3.cu", "train_llama3.py", "emu.h", "libnvidia-ml.so", "libnvidia-ml.so.1",
            "gpt2_124M.bin", "llmc_mc.yaml", "input.txt", "in.txt", "ids.txt", "notes.txt", "model.bin", "log.jsonl",
            "config.json", "model.safetensors", "vocab.json", "merges.txt", "pytorch_model.bin", "tokenizer.bin",
            "model.safetensors.index.json", "SET.jsonl", "OUT.bin", "my_set.jsonl", "my_set_tokens.jsonl", "runs.png",
            "log.png", "rand.bin", "E.json", "V.bpe", "gpt2_encoder.json", "gpt2_vocab.bpe", "tinyshakespeare.txt"}
def check_names():
    alltext = "\n".join(text.values())
    missing = []
    for t in set(re.findall(r"`make\s+([a-z][a-z0-9_/-]*)", alltext)) | set(re.findall(r"^make ([a-z][a-z0-9_/-]*)", alltext, re.M)):
        if not make_target(t): missing.append(f"make-{t}")
    for t in re.sub(r"^\.PHONY: *", "", next(l for l in makefile.splitlines() if l.startswith(".PHONY"))).split():
        if not re.search(rf"make\s+{re.escape(t)}(\s|`|$)", alltext, re.M): missing.append(f"undocumented-make-{t}")
    for p in set(re.findall(r"(?<![\w/.])((?:scripts|test|dev|cuda)/[A-Za-z0-9_./-]+\.(?:sh|py|cuh|cu|c|h|txt|png|jsonl|cpp))\b", alltext)):
        if not os.path.exists(p): missing.append(p)
    for f in sorted(glob.glob("scripts/*")):
        if os.path.basename(f) not in alltext: missing.append(f"undocumented-{f}")
    for name in set(re.findall(r"`([A-Za-z0-9_.-]+\.(?:h|c|cu|cuh|cpp|sh|py))`", alltext)):
        if name not in basenames and name not in EXTERNAL and not re.match(r"^(model|state)_S+\.bin$", name):
            missing.append(name)
    for v in set(re.findall(r"TRAIN_GPT_[A-Z0-9_]*[A-Z0-9]", alltext)):
        if v not in SOURCE_VARS: missing.append(v)
    result(not missing, "every make target, script, file and TRAIN_GPT_* variable named exists, and every script and phony target is named",
           "names that drifted: " + " ".join(sorted(missing)))

# 4. links and anchors resolve, every docs page is linked from the README, and the README stays short
def slug(h):
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")
def anchors(f):
    return {slug(m) for m in re.findall(r"^#+ (.*)$", text.get(f) or open(f).read(), re.M)}
def check_links():
    problems, n = [], 0
    for f in DOCS:
        body = re.sub(r"```.*?```", "", text[f], flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if re.match(r"^[a-z]+:", target): continue
            n += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(full): problems.append(f"{f}: link to {target}: no {full}"); continue
            if anchor and full.endswith(".md") and anchor not in anchors(full): problems.append(f"{f}: link to {target}: no such heading")
    for p in DOCS[1:]:
        if f"]({p})" not in readme: problems.append(f"{p} is not linked from the README")
    lines = readme.count("\n")
    if lines >= 350: problems.append(f"README.md has {lines} lines (the front door stays under 350)")
    result(not problems, f"{n} links and anchors resolve, every page of docs/ is linked from the README, README {lines} lines (< 350)", "; ".join(problems))

# 5. file formats: the magic numbers and versions docs/formats.md gives are those of the files a run writes
#    and of the readers' constants, and every key of a real log is documented there
def define(name):
    for p in glob.glob("**/*.h", recursive=True):
        m = re.search(rf"#define {name} (\d+)", open(p).read())
        if m: return int(m.group(1))
    raise KeyError(name)
def check_formats():
    fmt, problems = text["docs/formats.md"], []
    def doc_header(title):
        para = fmt[fmt.index(f"**{title}**"):]
        para = para[:para.index("\n\n")]
        magic = re.search(r"`\[0\]` (?:magic )?(\d+)", para); version = re.search(r"`\[1\]`\s(?:version\s)?\(?(\d+)", para)
        return (int(magic.group(1)) if magic else None, int(version.group(1)) if version else None)
    def file_header(pattern):
        files = sorted(glob.glob(os.path.join(W, "run", pattern)))
        if not files: problems.append(f"the run wrote no {pattern}"); return (None, None)
        return struct.unpack("<2i", open(files[-1], "rb").read(8))
    real = {"Model": file_header("model_*.bin"), "Training state": file_header("state_*.bin"),
            "Token shard": (define("SHARD_MAGIC"), define("SHARD_VERSION")),
            "Tokenizer": (define("TOKENIZER_MAGIC"), define("TOKENIZER_VERSION")),
            "Llama-family model": (define("LLAMA_MAGIC"), define("LLAMA_VERSION_FP32"))}
    for title, (magic, version) in real.items():
        d = doc_header(title)
        if d != (magic, version): problems.append(f"{title}: formats.md says magic {d[0]} version {d[1]}, the code {magic} {version}")
    log = fmt[fmt.index("## The log"):]; log = log[:log.index("\n## ")]
    keys = set()
    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items(): keys.add(k); walk(v)
    for line in open(os.path.join(W, "run", "log.jsonl")): walk(json.loads(line))
    undocumented = sorted(k for k in keys if f'"{k}"' not in log)
    if undocumented: problems.append("log keys not in formats.md: " + ", ".join(undocumented))
    result(not problems, f"formats.md: {len(real)} magic numbers and versions as the code writes them, {len(keys)} log keys of a real run all documented", "; ".join(problems))

# 6. outputs shown as real runs are what the runs print, in order (timings, threads and memory aside)
def mask(s):
    for a, b in [(r"[0-9]+ OpenMP threads?", "N OpenMP threads"), (r"[0-9.]+ ms(/step)?", r"T ms\1"), (r"[0-9]+ tok/s", "T tok/s"),
                 (r"[0-9.]+ GFLOP/s", "F GFLOP/s"), (r"RSS [0-9]+ MiB", "RSS M MiB"), (r"ETA [0-9.dhms]+", "ETA E"),
                 (r"(data|forward|backward|comm|optimizer|other) [0-9.]+", r"\1 T"), (r"sum [0-9.]+ of [0-9.]+", "sum T of T"),
                 (r"(available|free) [0-9.]+ per rank", r"\1 M per rank")]:
        s = re.sub(a, b, s)
    return s
def check_outputs(flag_line):
    problems, n = [], 0
    for f in DOCS:
        lines = text[f].split("\n")
        for i, l in enumerate(lines):
            m = re.match(r"^<!-- output of: (.*) -->$", l)
            if not m: continue
            block = next(b for b in blocks(f) if b[1] == i + 2)
            argv = shlex.split(m.group(1))
            if argv[0] not in TRAINERS: problems.append(f"{f}:{i+1}: only the trainer's runs are checked"); continue
            got = mask(run(argv, timeout=300).stdout).splitlines()
            shown = [x for x in block[3] if x.strip()]
            if shown and shown[0].strip() != "...":  # the run from its start: a line of every kind it prints
                kind = lambda x: re.match(r"[^:|0-9]*", x).group().strip()
                a, b = {kind(mask(x)) for x in shown if x.strip() != "..."}, {kind(x) for x in got}
                if a != b: problems.append(f"{f}:{i+1}: the lines shown are not of the kinds {m.group(1)} prints: missing {sorted(b - a)}, not printed {sorted(a - b)}")
            k = 0
            for w in (mask(x) for x in block[3] if x.strip() != "..."):
                while k < len(got) and got[k] != w: k += 1
                if k == len(got): problems.append(f"{f}:{i+1}: not printed by {m.group(1)} (in this order): {w}"); break
                k += 1
            n += 1
    # the README's sketch of make test: suites that run_tests.sh has, and the total test/checks.txt gives
    i = readme.index("<!-- suites of: make test -->")
    sketch = readme[i:].split("```")[1]
    counts = dict((name, int(c)) for c, name in (l.split("\t", 1) for l in open("test/checks.txt").read().splitlines() if l[:1].isdigit()))
    for name in re.findall(r"^(?:===|---) (.*?)(?: took [0-9]+ s(?: \([0-9]+ s of CPU\))?)?$", sketch, re.M):
        if name not in counts: problems.append(f"the README's make test sketch names a suite test/checks.txt does not: {name}")
    total = re.findall(r"^([0-9]+) passed, 0 failed, 0 skipped$", sketch, re.M)
    if not total or int(total[-1]) != sum(counts.values()): problems.append(f"the README's make test total {total[-1:] } is not test/checks.txt's {sum(counts.values())}")
    for l in re.findall(r"^PASS (README flag table.*)$", sketch, re.M):
        if not flag_line.startswith(l): problems.append(f"the README's make test sketch shows '{l}', the check prints '{flag_line}'")
    result(not problems and n > 0, f"{n} outputs shown as real runs are what those runs print; the make test sketch's suites and total are test/checks.txt's", "; ".join(problems))

# 7. what the docs say the program does, it does: each claim is looked for in its doc (a reworded claim fails here
# until this list follows it), and checked on a real run; no doc may say the opposite
def peak_rss_mib(argv):  # run in a Python of its own, whose only child is this one
    r = run([sys.executable, "-c", "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"] + argv)
    rc, kib = map(int, r.stdout.split())
    return rc, kib / 1024
def check_claims():
    problems, n = [], 0
    def claim(f, pattern, ok, detail):
        nonlocal n
        if not re.search(pattern, re.sub(r"\s+", " ", text[f])): problems.append(f"{f}: no longer says /{pattern}/ (update this check)")
        elif not ok: problems.append(f"{f} says /{pattern}/, but {detail}")
        n += 1
    for f in DOCS:  # the opposite, as docs/formats.md and docs/huggingface.md said before issue 44
        if re.search(r"without `?-n`? writes no checkpoint|`-o` alone writes none", re.sub(r"\s+", " ", text[f])):
            problems.append(f"{f}: says -o without -n writes no final checkpoint")
    out = W + "/claims"
    r = run([BIN, "-x", "2", "-v", "0", "-s", "0", "-o", out + "/final"])
    files = sorted(os.listdir(out + "/final")) if os.path.isdir(out + "/final") else []
    claim("README.md", r"given `-o` writes its final checkpoint there", files == ["model_00000002.bin", "state_00000002.bin"], f"-x 2 -o without -n left {files}")
    claim("docs/formats.md", r"With `-o DIR` the run writes a checkpoint after its last step", files == ["model_00000002.bin", "state_00000002.bin"], f"it left {files}")
    line = next((l for l in r.stdout.splitlines() if l.startswith("checkpoint: ")), "")
    claim("docs/formats.md", r"The console's `checkpoint:` line names both files", f"{out}/final/model_00000002.bin" in line and f"{out}/final/state_00000002.bin" in line, f"it prints '{line}'")
    rc, rss = peak_rss_mib([BIN, "--dry-run", "-e", "qwen2.5-0.5b"])
    claim("README.md", r"`--dry-run` \| \| print the configuration and the memory plan, then exit \(no model memory is allocated", rc == 0 and 0 < rss < 100, f"--dry-run -e qwen2.5-0.5b peaked at {rss:.0f} MiB of RSS (rc {rc})")
    os.makedirs(out + "/hf", exist_ok=True)
    open(out + "/hf/config.json", "w").write('{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}')
    r = run([BIN, "-x", "1", "-o", out + "/made/a/b", "--log", out + "/no/such/log.jsonl"])  # the log is opened after -o is made
    claim("README.md", r"an error at start leaves no directory behind", r.returncode != 0 and not os.path.exists(out + "/made"), f"-o {out}/made/a/b with a --log that cannot be written (rc {r.returncode}) left {out}/made")
    r = run([BIN, "-e", out + "/hf", "-x", "1"])
    claim("docs/huggingface.md", r"`-e` given a Hugging Face directory or file says to convert it with `scripts/import_hf.py`", "scripts/import_hf.py " + out + "/hf model.bin" in r.stderr, f"-e HF_DIR says: {r.stderr.strip()[:200]}")
    open(out + "/t.txt", "w").write("Hello there.\n\nGeneral Kenobi.\n" * 50)
    data = os.environ.get("DATA_DIR", "../shared/data")  # as run_tests.sh finds GPT-2's tokenizer files
    tk = ["./tokenize", "shards", "--encoder", data + "/gpt2_encoder.json", "--merges", data + "/gpt2_vocab.bpe", "--in", out + "/t.txt", "--out-dir", out + "/shards", "--val-tokens", "100"]
    if not os.path.exists(data + "/gpt2_encoder.json"): raise MissingDependency(f"{data}/gpt2_encoder.json (GPT-2's tokenizer files; set DATA_DIR) is missing")
    fresh, again = run(tk).stdout, run(tk + ["--resume"]).stdout
    claim("docs/data.md", r"the summary counts the MB skipped only on `--resume`", " MB read, " in fresh and "skipped" not in fresh and "MB skipped (--resume)" in again, f"fresh: '{fresh.strip().splitlines()[-1:]}', resumed: '{again.strip().splitlines()[-1:]}'")
    result(not problems, f"{n} claims of the docs about what the program does hold on real runs (final checkpoint with -o alone, the checkpoint line, --dry-run's memory, -o after an error, -e of a Hugging Face model, the shards summary)", "; ".join(problems))

checks = [check_flags, check_commands, check_names, check_links, check_formats, check_claims]
flag_line = ""
for c in checks:
    try:
        r = c()
        if c is check_flags: flag_line = r
    except MissingDependency as e:
        result(None, f"{c.__name__}: {e}")
    except Exception:
        result(False, f"{c.__name__} crashed", traceback.format_exc())
try: check_outputs(flag_line)
except Exception: result(False, "check_outputs crashed", traceback.format_exc())
PYEOF
while IFS= read -r line; do
  ok=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["ok"])' "$line")
  msg=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["msg"])' "$line")
  detail=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["detail"])' "$line")
  if [ "$ok" = True ]; then ok "$msg"; elif [ "$ok" = None ]; then skip "$msg"; else bad "$msg" "$(tr ';' '\n' <<<"$detail")"; fi
done < "$W/results"
[ "$(wc -l < "$W/results")" -eq 7 ] || bad "the checker printed $(wc -l < "$W/results") results, not 7"
finish
