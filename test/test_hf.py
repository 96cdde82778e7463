#!/usr/bin/python3
"""test_hf.py: Hugging Face export and import (scripts/export_hf.py, scripts/import_hf.py) against
transformers itself, the trainer's forward (test/hf_forward) and both trainer builds. Run by test/test_hf.sh
with Debian's python (torch) and transformers, safetensors importable. Prints PASS/FAIL per check and the
"N passed, N failed" line run_tests.sh counts.

    test/test_hf.py --work DIR --data ../shared/data [--emu ./train_gpt_emu]
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel  # noqa: E402

transformers.logging.set_verbosity_error()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
passed = failed = skipped = 0


def check(name, ok, detail=""):  # (test_hf_llama.py's and test_eval_mc.py's too)
    global passed, failed
    if ok:
        passed += 1
        print("PASS %s" % name)
    else:
        failed += 1
        print("FAIL %s%s" % (name, (": " + detail[-1500:]) if detail else ""))
    sys.stdout.flush()


def run(args, **kw):
    return subprocess.run(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def script(name, *args):
    return run([PY, os.path.join(ROOT, "scripts", name)] + [str(x) for x in args])


def write_shard(path, tokens):
    h = [0] * 256
    h[0], h[1], h[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *h))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def trainer_logits(model_bin, tokens, work):
    B, T = tokens.shape
    tin, tout = os.path.join(work, "tok.i32"), os.path.join(work, "logits.f32")
    tokens.astype("<i4").tofile(tin)
    r = run(["./test/hf_forward", "logits", model_bin, tin, str(B), str(T), tout])
    if r.returncode != 0:
        raise RuntimeError(r.stdout)
    return np.fromfile(tout, dtype="<f4").reshape(B, T, -1)


def hf_load(d):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    weight_warn = [str(x.message) for x in w if "weight" in str(x.message).lower()]
    return m.eval(), info, weight_warn


def check_decoding(model_bin, m, prompt, label, pad, min_distinct):
    """The trainer's decoding (test/hf_forward greedy: the cached path run_sample takes) against transformers."""
    r = run(["./test/hf_forward", "greedy", model_bin, "20", "1234"] + [str(t) for t in prompt])
    lines = dict(l.split(":", 1) for l in r.stdout.strip().split("\n") if ":" in l)
    greedy = [int(t) for t in lines.get("greedy", "").split()]
    with torch.no_grad():
        hg = m.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False, pad_token_id=pad)[0, len(prompt):].tolist()
    check("%s: greedy generation (argmax, the trainer's rule at temperature 0) gives transformers' "
          "generate(do_sample=False) tokens, %d distinct: %s" % (label, len(set(hg)), greedy[:8]),
          greedy == hg and len(hg) == 20 and len(set(hg)) >= min_distinct, "%s vs %s" % (greedy, hg))
    # the trainer's rule at temperature 1: token = first i with cumsum(exp(l - max)) > u * sum(exp(l - max)),
    # u the trainer's draw; applied to transformers' logits of the same prefix
    f = lines.get("sample", "").split()
    us, toks = [float(v) for v in f[0::2]], [int(v) for v in f[1::2]]
    seq, same = list(prompt), 0
    with torch.no_grad():
        for u, t in zip(us, toks):
            lg = m(torch.tensor([seq])).logits[0, -1].double().numpy()
            e = np.exp(lg - lg.max())
            same += int(np.searchsorted(np.cumsum(e), u * e.sum(), side="right")) == t
            seq.append(t)
    check("%s: sampling, the trainer's draws through its rule (inverse CDF of softmax) on transformers' logits pick the "
          "trainer's %d tokens" % (label, len(toks)), same == len(toks) == 20, "%d of %d" % (same, len(toks)))


def test_export(a, work):
    """A model trained a few steps, exported from its out dir: loads, same logits, same decoding."""
    ts = os.path.join(work, "ts")
    r = run(["./tokenize", "shards", "--encoder", os.path.join(a.data, "gpt2_encoder.json"), "--merges",
             os.path.join(a.data, "gpt2_vocab.bpe"), "--in", os.path.join(a.data, "tinyshakespeare.txt"), "--out-dir", ts])
    out = os.path.join(work, "out")
    r = run(["./train_gpt_cpu", "-i", ts + "/train_*.bin", "-j", ts + "/val_*.bin", "-e", "d2", "-b", "4", "-t", "32",
             "-x", "4", "-l", "1e-3", "-v", "0", "-s", "0", "-o", out, "-n", "2"])
    check("a d2 model trains 4 steps on Tiny Shakespeare with checkpoints", r.returncode == 0 and
          os.path.exists(os.path.join(out, "model_00000004.bin")), r.stdout[-500:])
    hf = os.path.join(work, "hf")
    r = script("export_hf.py", out, hf, "--encoder", os.path.join(a.data, "gpt2_encoder.json"),
               "--merges", os.path.join(a.data, "gpt2_vocab.bpe"))
    check("export_hf.py takes the out dir's newest checkpoint (step 4)", r.returncode == 0 and "model_00000004.bin" in r.stdout,
          r.stdout)
    m, info, ww = hf_load(hf)
    check("transformers loads it as GPT2LMHeadModel: no missing, unexpected or mismatched weights, no warning about weights",
          type(m).__name__ == "GPT2LMHeadModel" and not info["missing_keys"] and not info["unexpected_keys"]
          and not info["mismatched_keys"] and not ww, "%s %s" % (info, ww))
    tok = AutoTokenizer.from_pretrained(hf)
    text = "First Citizen:\nBefore we proceed any further, hear me speak."
    ids = [int(x) for x in run(["./tokenize", "encode", "--encoder", os.path.join(a.data, "gpt2_encoder.json"), "--merges",
                                os.path.join(a.data, "gpt2_vocab.bpe")], input=text).stdout.split()]
    check("AutoTokenizer loads the exported tokenizer and encodes as ./tokenize does (%d tokens)" % len(ids),
          tok(text)["input_ids"] == ids and tok.eos_token_id == 50256, "%s vs %s" % (tok(text)["input_ids"], ids))
    model_bin = os.path.join(out, "model_00000004.bin")
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 50257, (3, 32), generator=g)
    ref = trainer_logits(model_bin, x.numpy(), work)
    with torch.no_grad():
        got = m(x).logits.numpy()
    d = float(np.abs(got - ref).max())
    check("logits of a (3, 32) batch: transformers equals the trainer's forward within 1e-5 (max |diff| %.2e, scale %.1f)"
          % (d, float(np.abs(ref).max())), got.shape == ref.shape and d <= 1e-5)
    check_decoding(model_bin, m, ids[:6], "the trained d2 model", 50256, 1)
    return hf, model_bin


def test_roundtrip(a, work, hf, model_bin):
    back = os.path.join(work, "back.bin")
    r = script("import_hf.py", hf, back)
    check("model file -> export -> import is byte-identical (v3 fp32)", r.returncode == 0 and
          open(back, "rb").read() == open(model_bin, "rb").read(), r.stdout)
    hf2 = os.path.join(work, "hf2")
    r = script("export_hf.py", back, hf2, "--no-tokenizer")
    same = r.returncode == 0 and all(open(os.path.join(hf, n), "rb").read() == open(os.path.join(hf2, n), "rb").read()
                                     for n in ("model.safetensors", "config.json"))
    check("export -> import -> export: model.safetensors and config.json byte-identical", same, r.stdout)
    b16 = os.path.join(work, "bf16.bin")
    r = script("import_hf.py", hf, b16, "--dtype", "bf16")
    hf3, b16b = os.path.join(work, "hf3"), os.path.join(work, "bf16b.bin")
    r2 = script("export_hf.py", b16, hf3, "--no-tokenizer")
    r3 = script("import_hf.py", hf3, b16b)
    check("v5 bf16: import --dtype bf16 -> export (BF16 tensors) -> import is byte-identical and stays version 5",
          r.returncode == r2.returncode == r3.returncode == 0 and open(b16, "rb").read() == open(b16b, "rb").read()
          and struct.unpack("<2i", open(b16b, "rb").read(8))[1] == 5, r.stdout + r2.stdout + r3.stdout)
    m, info, ww = hf_load(hf3)
    x = torch.randint(0, 50257, (2, 16), generator=torch.Generator().manual_seed(9))
    ref = trainer_logits(b16, x.numpy(), work)
    with torch.no_grad():
        got = m(x).logits.numpy()
    d = float(np.abs(got - ref).max())
    check("the bf16 export loads without weight warnings and its logits equal the trainer's on the v5 file within 1e-5 "
          "(%.2e)" % d, not info["missing_keys"] and not info["unexpected_keys"] and not ww and d <= 1e-5)


def test_random_import(a, work):
    """A random GPT2LMHeadModel saved by transformers: imports, trains in both builds, same loss as transformers."""
    torch.manual_seed(0)
    # weights of std 0.2, not GPT-2's 0.02: sharper logits, so that greedy decoding does not repeat one token
    cfg = GPT2Config(vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4, initializer_range=0.2)
    m = GPT2LMHeadModel(cfg).eval()
    hf = os.path.join(work, "rand_hf")
    m.save_pretrained(hf)
    binf = os.path.join(work, "rand.bin")
    r = script("import_hf.py", hf, binf)
    check("a random GPT2LMHeadModel saved by transformers (vocab 300, L=2, C=64, weights of std 0.2) imports", r.returncode == 0, r.stdout)
    # the same weights as PyTorch's pytorch_model.bin, and in the official gpt2 layout: names without "transformer.",
    # the attention-mask buffers, and lm_head.weight beside wte
    ptdir = os.path.join(work, "rand_pt")
    m.save_pretrained(ptdir, safe_serialization=False)
    r = script("import_hf.py", ptdir, os.path.join(work, "rand_pt.bin"))
    check("the same model saved as pytorch_model.bin imports to the same bytes", r.returncode == 0 and
          open(os.path.join(work, "rand_pt.bin"), "rb").read() == open(binf, "rb").read(), r.stdout)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from llmc_hf import read_safetensors, write_safetensors
    ofdir = os.path.join(work, "rand_official")
    os.makedirs(ofdir)
    shutil.copy(os.path.join(hf, "config.json"), ofdir)
    t = [(n[len("transformer."):], np.asarray(a), tag) for n, (a, tag) in read_safetensors(os.path.join(hf, "model.safetensors")).items()]
    mask = np.tril(np.ones((1, 1, 64, 64), dtype=np.float32))
    t += [("h.%d.attn.bias" % i, mask, "F32") for i in range(2)] + [("lm_head.weight", dict((n, a) for n, a, _ in t)["wte.weight"], "F32")]
    write_safetensors(os.path.join(ofdir, "model.safetensors"), t, {"format": "pt"})
    r = script("import_hf.py", ofdir, os.path.join(work, "rand_of.bin"))
    check("the official gpt2 layout (no 'transformer.' prefix, attn.bias buffers, lm_head.weight) imports to the same bytes",
          r.returncode == 0 and open(os.path.join(work, "rand_of.bin"), "rb").read() == open(binf, "rb").read(), r.stdout)
    B, T = 4, 16
    w = torch.randint(0, 300, (B * T + 1,), generator=torch.Generator().manual_seed(3))
    shard = os.path.join(work, "rand_train_000000.bin")
    write_shard(shard, w.tolist())  # exactly one micro-batch window: every step sees this batch
    x, y = w[:-1].view(B, T), w[1:].view(B, T)
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(m(x).logits.view(-1, 300), y.reshape(-1)))
    check_decoding(binf, m, [5, 17, 42], "the random model", 299, 5)
    builds = [("CPU build", "./train_gpt_cpu")] + ([("CUDA build on the emulator", a.emu)] if a.emu else [])
    if not a.emu:
        global skipped
        skipped += 1
        print("SKIP the CUDA build on the emulator: no ./train_gpt_emu (make train_gpt_emu needs the CUDA toolkit's headers)")
    for name, binary in builds:
        log = os.path.join(work, "rand_%s.jsonl" % os.path.basename(binary))
        r = run([binary, "-e", binf, "-i", shard, "-b", str(B), "-t", str(T), "-x", "5", "-l", "1e-3", "-u", "0",
                 "-v", "0", "-s", "0", "--shuffle", "0", "--precision", "fp32", "--log", log])
        losses = [json.loads(l)["loss"] for l in open(log) if '"loss"' in l] if os.path.exists(log) else []
        ok = r.returncode == 0 and len(losses) == 5 and abs(losses[0] - loss) <= 1e-5 * max(1.0, loss) and losses[-1] < losses[0] - 0.05
        check("%s trains the imported model: step 1 loss %.6f vs transformers' %.6f on the same batch (within 1e-5), then "
              "falls to %.4f" % (name, losses[0] if losses else float("nan"), loss, losses[-1] if losses else float("nan")),
              ok, r.stdout[-400:])


def test_llama_gpt2_tokenizer(a, work):
    """A Llama-family model trained on GPT-2's tokens exports with a tokenizer that AutoTokenizer loads and that
    encodes as the training data was (./tokenize with GPT-2's files): from --encoder/--merges, and from the run's
    tokenizer.bin (checked against encoder.json); a tokenizer.bin that is not GPT-2's is refused by name."""
    enc, mer = os.path.join(a.data, "gpt2_encoder.json"), os.path.join(a.data, "gpt2_vocab.bpe")
    ts, out = os.path.join(work, "ts"), os.path.join(work, "llama_out")  # ts: test_export's GPT-2 shards
    r = run(["./train_gpt_cpu", "-i", ts + "/train_*.bin", "-j", ts + "/val_*.bin", "-e", "llama-d1", "-b", "2", "-t", "32",
             "-x", "2", "-v", "0", "-s", "0", "-o", out, "-n", "2"])
    check("a llama-d1 model trains 2 steps on Tiny Shakespeare's GPT-2 shards (vocabulary 50257)", r.returncode == 0 and
          os.path.exists(os.path.join(out, "model_00000002.bin")), r.stdout[-500:])
    with open(os.path.join(a.data, "tinyshakespeare.txt"), encoding="utf-8") as f:
        text = f.read(5000)
    want = [int(x) for x in run(["./tokenize", "encode", "--encoder", enc, "--merges", mer], input=text).stdout.split()]
    for k, (how, flags) in enumerate((("--encoder/--merges", ["--encoder", enc, "--merges", mer]),
                                      ("the run's tokenizer.bin", ["--tokenizer", os.path.join(ts, "tokenizer.bin"), "--encoder", enc]))):
        hf = os.path.join(work, "llama_hf_%d" % k)
        r = script("export_hf.py", out, hf, *flags)
        ok = r.returncode == 0
        tok = AutoTokenizer.from_pretrained(hf) if ok else None
        ids = tok(text)["input_ids"] if ok else []
        c = json.load(open(os.path.join(hf, "config.json"))) if ok else {}
        first = next((i for i, (x, y) in enumerate(zip(ids, want)) if x != y), None)
        check("Llama export with %s: AutoTokenizer encodes Tiny Shakespeare's first 5000 characters as ./tokenize does, "
              "id for id (%d ids), and config.json's eos is 50256" % (how, len(want)),
              ids == want and len(want) > 1000 and c.get("eos_token_id") == 50256 and c.get("architectures") == ["LlamaForCausalLM"],
              r.stdout + " first difference at %s, %d vs %d ids" % (first, len(ids), len(want)))
    bad = os.path.join(work, "tok_bad", "tokenizer.bin")
    os.makedirs(os.path.dirname(bad))
    raw = bytearray(open(os.path.join(ts, "tokenizer.bin"), "rb").read())
    raw[1024 + 1] ^= 1  # token 0 ("!", one byte) becomes another byte
    open(bad, "wb").write(raw)
    expect_error("Llama export with a tokenizer.bin of 50257 tokens that are not GPT-2's",
                 ["export_hf.py", out, os.path.join(work, "llama_bad"), "--tokenizer", bad, "--encoder", enc],
                 ["tokenizer.bin", "token 0", "not GPT-2's"], os.path.join(work, "llama_bad"))


def expect_error(name, args, want, nothing):
    r = script(*args)
    check("%s: exit 1 naming %s, nothing written" % (name, " and ".join(want)),
          r.returncode == 1 and all(w in r.stdout for w in want) and not os.path.exists(nothing)
          and "Traceback" not in r.stdout, r.stdout.strip())


def test_errors(a, work):
    torch.manual_seed(1)
    base = os.path.join(work, "err_hf")
    GPT2LMHeadModel(GPT2Config(vocab_size=200, n_positions=32, n_embd=32, n_layer=1, n_head=2)).save_pretrained(base)
    out = os.path.join(work, "err.bin")
    arch = os.path.join(work, "err_arch")
    shutil.copytree(base, arch)
    c = json.load(open(os.path.join(arch, "config.json")))
    c["model_type"], c["architectures"] = "gpt_neox", ["GPTNeoXForCausalLM"]
    json.dump(c, open(os.path.join(arch, "config.json"), "w"))
    expect_error("an unsupported architecture (model_type gpt_neox)", ["import_hf.py", arch, out],
                 ["config.json", "model_type", "gpt_neox"], out)
    act = os.path.join(work, "err_act")
    shutil.copytree(base, act)
    c = json.load(open(os.path.join(act, "config.json")))
    c["activation_function"] = "relu"
    json.dump(c, open(os.path.join(act, "config.json"), "w"))
    expect_error("a GPT-2 with another activation", ["import_hf.py", act, out], ["config.json", "activation_function"], out)
    shp = os.path.join(work, "err_shape")
    shutil.copytree(base, shp)
    c = json.load(open(os.path.join(shp, "config.json")))
    c["n_embd"], c["n_head"] = 64, 2
    json.dump(c, open(os.path.join(shp, "config.json"), "w"))
    expect_error("shapes that do not match config.json", ["import_hf.py", shp, out], ["model.safetensors", "wte.weight", "shape"], out)
    tr = os.path.join(work, "err_trunc")
    shutil.copytree(base, tr)
    p = os.path.join(tr, "model.safetensors")
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 1000)
    expect_error("a truncated model.safetensors", ["import_hf.py", tr, out], ["model.safetensors", "truncated"], out)
    bad = os.path.join(work, "bad.bin")
    open(bad, "wb").write(open(os.path.join(work, "rand.bin"), "rb").read()[:5000])
    expect_error("a truncated llm.c model file on export", ["export_hf.py", bad, os.path.join(work, "err_out")],
                 ["bad.bin", "truncated"], os.path.join(work, "err_out"))
    left = [n for n in os.listdir(work) if n.startswith(".export_hf.") or ".tmp" in n]
    check("no temporary files left behind by the failures", not left, str(left))
    # a Python without numpy (-S hides site-packages): each script says what it needs in one line, not a traceback
    outs = {s: subprocess.run([sys.executable, "-S", os.path.join(ROOT, "scripts", s), "x", "y"], capture_output=True, text=True)
            for s in ("export_hf.py", "import_hf.py", "llmc_llama.py")}
    check("without numpy, export_hf.py, import_hf.py and llmc_llama.py exit 1 with one line naming it and how to install it",
          all(r.returncode == 1 and r.stderr.strip() == "error: %s needs numpy: pip install numpy (or apt-get install "
              "python3-numpy)" % s for s, r in outs.items()), str({s: r.stderr[-200:] for s, r in outs.items()}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--emu", default="")
    a = ap.parse_args()
    hf, model_bin = test_export(a, a.work)
    test_roundtrip(a, a.work, hf, model_bin)
    test_llama_gpt2_tokenizer(a, a.work)
    test_random_import(a, a.work)
    test_errors(a, a.work)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
