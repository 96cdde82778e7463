"""hf_masks.py: test_hf_llama.py's checks of attention's masks at export (issue 49): what scripts/export_hf.py does
with a checkpoint trained with --attn-window, --attn-window-pattern or --doc-mask, judged by transformers itself."""
import json
import os
import struct

import torch

import test_hf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, T, NTOK = 2, 64, 20000


def shard(path, sep):
    """An llm.c shard of random tokens below 64 recording `sep` as its document separator (dataloader.h's words 3-4)."""
    g = torch.Generator().manual_seed(3)
    toks = torch.randint(0, 64, (NTOK,), generator=g)
    h = [0] * 256
    h[:5] = [20240520, 1, NTOK, 20261206, sep]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *h) + toks.numpy().astype("<u2").tobytes())
    return toks


def train(work, name, s, *flags):
    out = os.path.join(work, name)
    r = test_hf.run([os.path.join(ROOT, "train_gpt_cpu"), "-e", "llama-d2", "-i", s, "-j", s, "-x", "2", "-b", str(B),
                     "-t", str(T), "-v", "2", "-m", "2", "-s", "0", "-o", out, "--log", out + ".jsonl"] + list(flags))
    return out, r


def val_loss(model, toks, windows=2):
    """transformers' mean loss over the trainer's validation micro-batches (in order: window g at g B T)."""
    s = 0.0
    with torch.no_grad():
        for g in range(windows):
            w = toks[g * B * T: g * B * T + B * T + 1]
            s += float(torch.nn.functional.cross_entropy(model(w[:-1].view(B, T)).logits.reshape(B * T, -1), w[1:]))
    return s / windows


def test_masks(work):
    from transformers import AutoModelForCausalLM
    s = os.path.join(work, "masks.bin")
    toks = shard(s, 5)
    out, r = train(work, "win16", s, "--attn-window", "16")
    exp = os.path.join(work, "win16_hf")
    e = test_hf.script("export_hf.py", out, exp, "--no-tokenizer")
    ok = r.returncode == 0 and e.returncode == 0
    c = json.load(open(os.path.join(exp, "config.json"))) if ok else {}
    test_hf.check("a checkpoint trained with --attn-window 16 exports as MistralForCausalLM, sliding_window 16, saying so",
                  ok and c.get("architectures") == ["MistralForCausalLM"] and c.get("sliding_window") == 16
                  and "sliding window of 16 keys" in e.stdout, r.stdout[-500:] + e.stdout)
    if ok:
        want = [json.loads(ln)["val_loss"] for ln in open(out + ".jsonl") if "val_loss" in ln][-1]
        m = AutoModelForCausalLM.from_pretrained(exp, attn_implementation="eager", torch_dtype=torch.float64)
        got = val_loss(m, toks)
        m.config.sliding_window = None  # the same weights attending over the whole row: what the window changes
        whole = val_loss(m, toks)
        test_hf.check("its eager attention sees the trainer's 16 keys: the validation loss %.7f equals the trainer's %.7f "
                      "within 1e-6 relative (%.1e; over the whole row %.1e off)" % (got, want, abs(got - want) / want,
                                                                                   abs(whole - want) / want),
                      abs(got - want) <= 1e-6 * want and abs(whole - want) > 1e-5 * want)
    out, r = train(work, "lg", s, "--attn-window", "16", "--attn-window-pattern", "LG")
    e = test_hf.script("export_hf.py", out, os.path.join(work, "lg_hf"), "--no-tokenizer")
    out2, r2 = train(work, "doc", s, "--doc-mask")
    e2 = test_hf.script("export_hf.py", out2, os.path.join(work, "doc_hf"), "--no-tokenizer")
    test_hf.check("a per-layer window pattern (LG) is refused, naming the windows; --doc-mask exports as LlamaForCausalLM, "
                  "saying transformers has no document mask",
                  r.returncode == 0 and e.returncode != 0 and "per-layer windows [16, 0]" in e.stdout
                  and r2.returncode == 0 and e2.returncode == 0 and "no config field for a document mask" in e2.stdout
                  and "LlamaForCausalLM" in e2.stdout, e.stdout + e2.stdout + r2.stdout[-300:])
