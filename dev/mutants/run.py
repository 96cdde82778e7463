#!/usr/bin/env python3
"""Mutation testing: plant each bug of dev/mutants/catalogue.txt, one at a time, in a scratch copy of the
working tree, rebuild, and run the suites that should catch it. A mutant is caught when one of its suites
fails; missed when all of them pass; broken when its text does not occur exactly once in its file (the
catalogue has gone stale) or the copy does not build (a mutant must be a plausible bug, not a syntax error).

    python3 dev/mutants/run.py [--only ID[,ID..]] [--list] [--keep] [--out FILE]

Prints one line per mutant and closes with "N caught, N missed" (and "N broken" when there are any);
exits 1 unless every mutant was caught. First it runs every suite the catalogue names on the unmutated
copy, which must pass: a suite that fails without a bug cannot vouch for catching one.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_PY = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
PY = os.environ.get("PYTHON", "python3")
DATA = os.environ.get("DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))

CPU_BINS = ["train_gpt_cpu", "tokenize", "test/test_gpt2", "test/test_units", "test/test_pipeline", "test/test_generate"]
# suite name -> (make targets beyond CPU_BINS, shell command run in the copy's root)
SUITES = {
    "units": ([], "./test/test_units"),
    "schedule": ([], "./test/test_pipeline"),
    "arch": (["test/test_arch"], "./test/test_arch"),
    "tp": ([], "bash test/test_tp.sh"),
    "generate": ([], "./test/test_generate"),
    "gpt2": ([], f"{TORCH_PY} test/ref_gpt2.py --out-dir $MUT_TMP/ref >/dev/null && ./test/test_gpt2 $MUT_TMP/ref"),
    "reference": ([], "REF_EMU=0 bash test/test_reference.sh"),
    "reference-emu": (["train_gpt_emu"], "bash test/test_reference.sh"),
    "muon": ([], "bash test/test_muon.sh"),
    "llama-cpu": (["test/test_llama_cpu"],
                  f"{TORCH_PY} test/ref_llama.py --out-dir $MUT_TMP/llama >/dev/null && ./test/test_llama_cpu $MUT_TMP/llama"),
    "adafactor": ([], "bash test/test_adafactor.sh"),
    "cli": ([], "bash test/test_cli.sh"),
    "tp-plan": ([], "bash test/test_tp_plan.sh"),
    "precision": ([], "bash test/test_precision.sh"),
    "zero": ([], "bash test/test_zero.sh"),
    "pipeline": ([], "bash test/test_pipeline.sh"),
    "tp-plan": ([], "bash test/test_tp_plan.sh"),
    "cluster": ([], "bash test/test_cluster.sh"),
    "tokenizer": ([], f"{PY} test/test_tokenizer.py --tokenize ./tokenize --encoder {DATA}/gpt2_encoder.json "
                      f"--merges {DATA}/gpt2_vocab.bpe --text {DATA}/tinyshakespeare.txt"),
    "shards": ([], f"{PY} test/test_shards.py --tokenize ./tokenize --encoder {DATA}/gpt2_encoder.json "
                   f"--merges {DATA}/gpt2_vocab.bpe --text {DATA}/tinyshakespeare.txt"),
    "hf": (["test/hf_forward"], "bash test/test_hf.sh"),
    "hf-llama": (["test/hf_forward"], f"{TORCH_PY} test/test_hf_llama.py"),
    "tp": ([], "bash test/test_tp.sh"),
    "eval-mc": ([], "bash test/test_eval_mc.sh"),
    "emu-kernels": (["dev/cuda/kernels_emu"], "./dev/cuda/kernels_emu check"),
    "emu-attention": (["dev/cuda/attention_emu"], "./dev/cuda/attention_emu check small"),
    "emu-attn-masks": (["dev/cuda/attention_emu"], "./dev/cuda/attention_emu check masks"),
    "emu-gpt2": (["test/test_gpt2_emu"],
                 f"{TORCH_PY} test/ref_gpt2.py --out-dir $MUT_TMP/ref >/dev/null && ./test/test_gpt2_emu $MUT_TMP/ref"),
    "emu-graphs": (["train_gpt_emu"], "bash test/test_cuda_emu.sh graphs"),
    "emu-maskplan": (["train_gpt_emu"], "bash test/test_cuda_emu.sh maskplan"),
    "emu-llama": (["train_gpt_emu", "test/test_generate_emu"], "bash test/test_cuda_emu.sh llama"),
    "emu-muon": (["train_gpt_emu", "dev/cuda/kernels_emu", "train_gpt_cpu"], "bash test/test_cuda_emu.sh muon"),
    "emu": (["train_gpt_emu", "train_gpt_emu_race", "test/test_gpt2_emu", "dev/cuda/kernels_emu", "dev/cuda/attention_emu",
             "dev/cuda/kernels_emu_race", "dev/cuda/kernels_emu_asan", "dev/cuda/emu/selftest", "dev/cuda/emu/selftest_race"],
            "bash test/test_cuda_emu.sh"),
}


def parse_catalogue(path):
    """Blocks separated by blank lines: '## ID: what the bug is', then 'file:', 'old:', 'new:', 'suites:'.
    old/new are matched literally (leading and trailing spaces of the value ignored; \\n stands for a newline)."""
    muts, cur = [], None
    for ln in open(path):
        ln = ln.rstrip("\n")
        if ln.startswith("## "):
            m = re.match(r"## ([\w-]+): (.*)", ln)
            assert m, f"{path}: bad mutant heading {ln!r}"
            cur = {"id": m.group(1), "what": m.group(2)}
            muts.append(cur)
        elif cur is not None and re.match(r"(file|old|new|suites):", ln):
            k, v = ln.split(":", 1)
            cur[k] = v.strip().replace("\\n", "\n") if k in ("old", "new") else v.strip()
    for m in muts:
        missing = [k for k in ("file", "old", "new", "suites") if k not in m]
        assert not missing, f"{path}: mutant {m['id']} lacks {missing}"
        m["suites"] = m["suites"].split()
        for s in m["suites"]:
            assert s in SUITES, f"{path}: mutant {m['id']}: unknown suite {s} (known: {' '.join(SUITES)})"
    ids = [m["id"] for m in muts]
    assert len(ids) == len(set(ids)), f"{path}: duplicate mutant ids"
    return muts


def copy_tree(dst):
    """The working tree as it is (tracked and untracked files, build outputs included, so that make rebuilds
    only what a mutant touches), without .git."""
    shutil.copytree(ROOT, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    if os.path.isdir(shared) and not os.path.exists(os.path.join(os.path.dirname(dst), "shared")):
        os.symlink(shared, os.path.join(os.path.dirname(dst), "shared"))


def sh(cmd, cwd, log, env=None, timeout=1800):
    with open(log, "a") as f:
        f.write(f"$ {cmd}\n")
        f.flush()
        try:
            return subprocess.run(cmd, shell=True, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"timed out after {timeout} s\n")
            return 124


def build(tree, targets, log):
    return sh("make -s " + " ".join(CPU_BINS + targets), tree, log) == 0


def run_suites(tree, suites, log, tmp):
    """Returns the first suite that fails, or None when all pass."""
    env = dict(os.environ, MUT_TMP=tmp, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    for s in suites:
        os.makedirs(os.path.join(tmp, "ref"), exist_ok=True)
        if sh(SUITES[s][1], tree, log, env) != 0:
            return s
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="list the catalogue and exit")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (logs per mutant)")
    ap.add_argument("--out", help="also write the result lines to this file")
    ap.add_argument("--skip-baseline", action="store_true", help="do not run the suites on the unmutated copy first")
    a = ap.parse_args()
    muts = parse_catalogue(os.path.join(HERE, "catalogue.txt"))
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {m["id"] for m in muts}
        if unknown:
            sys.exit(f"--only: no mutant {', '.join(sorted(unknown))} in dev/mutants/catalogue.txt")
        muts = [m for m in muts if m["id"] in want]
    if a.list:
        for m in muts:
            print(f"{m['id']:28s} {m['file']:22s} [{' '.join(m['suites'])}] {m['what']}")
        return 0

    scratch = tempfile.mkdtemp(prefix="mutants.")
    tree = os.path.join(scratch, "tree")
    copy_tree(tree)
    results, lines = {"caught": 0, "missed": 0, "broken": 0}, []

    def report(line):
        print(line, flush=True)
        lines.append(line)

    t_all = time.time()
    suites_used = sorted({s for m in muts for s in m["suites"]}, key=list(SUITES).index)
    if not a.skip_baseline:
        log = os.path.join(scratch, "baseline.log")
        t0 = time.time()
        targets = sorted({t for s in suites_used for t in SUITES[s][0]})
        failed = "build" if not build(tree, targets, log) else run_suites(tree, suites_used, log, os.path.join(scratch, "tmp"))
        if failed:
            print(f"baseline: suite {failed} fails on the unmutated tree; fix that first (log: {log})")
            return 1
        report(f"baseline: {len(suites_used)} suites pass unmutated ({' '.join(suites_used)}) in {time.time() - t0:.0f} s")

    for m in muts:
        t0 = time.time()
        log = os.path.join(scratch, m["id"] + ".log")
        path = os.path.join(tree, m["file"])
        src = open(path).read() if os.path.exists(path) else ""
        n = src.count(m["old"])
        if n != 1:
            results["broken"] += 1
            report(f"BROKEN {m['id']}: its text occurs {n} times in {m['file']}, not once")
            continue
        open(path, "w").write(src.replace(m["old"], m["new"]))
        try:
            targets = sorted({t for s in m["suites"] for t in SUITES[s][0]})
            if not build(tree, targets, log):
                results["broken"] += 1
                report(f"BROKEN {m['id']}: the mutated tree does not build (see {log})")
                continue
            by = run_suites(tree, m["suites"], log, os.path.join(scratch, "tmp"))
            if by:
                results["caught"] += 1
                first = ""
                for ln in open(log):
                    if ln.startswith("FAIL ") or "FAIL" in ln[:6]:
                        first = ln.strip()[:110]
                        break
                report(f"caught {m['id']:28s} by {by:12s} {time.time() - t0:5.0f} s  {first}")
            else:
                results["missed"] += 1
                report(f"MISSED {m['id']:28s} ({' '.join(m['suites'])} all pass) {time.time() - t0:5.0f} s  {m['what']}")
        finally:
            open(path, "w").write(src)
            os.utime(path)  # newer than the mutated build, so the next make rebuilds it
    tail = f"{results['caught']} caught, {results['missed']} missed" + (f", {results['broken']} broken" if results["broken"] else "")
    report(f"{tail} ({time.time() - t_all:.0f} s)")
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if a.keep:
        print(f"logs kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if results["missed"] == 0 and results["broken"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
