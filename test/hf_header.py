"""hf_header.py: checks of test/test_hf_llama.py's suite, kept beside it (its file would pass 800 lines): a
--mlp relu2 model's export to transformers, GeGLU's import and export, and the Llama-family header's tables in the docs against the writers.
"""
import copy
import json
import os
import re
import struct
import sys

import numpy as np

import torch
from transformers import AutoModelForCausalLM

import test_hf
from test_hf import ROOT, check, script


def test_relu2(work, trainer_loss):
    """A --mlp relu2 model (trained 3 steps by the trainer) exports to LlamaForCausalLM with hidden_act relu and
    gate_proj = up_proj (relu(u) * u = relu(u)², which no class with RMSNorm has ungated: export_hf.py says why), and
    transformers' loss on a batch is the trainer's own (test/hf_forward) within 1e-5."""
    run = os.path.join(work, "relu2_run")
    r = test_hf.run([os.path.join(ROOT, "train_gpt_cpu"), "-e", "llama-d2", "--mlp", "relu2", "-b", "2", "-t", "16", "-x", "3",
                     "-v", "0", "-s", "0", "-o", run])
    out = os.path.join(work, "relu2_hf")
    e = script("export_hf.py", run, out, "--no-tokenizer")
    if r.returncode != 0 or e.returncode != 0:
        check("a --mlp relu2 model exports and loads in transformers", False, r.stdout + e.stdout)
        return
    m = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, m.config.vocab_size, (2, 16), generator=g)
    y = torch.randint(0, m.config.vocab_size, (2, 16), generator=g)
    with torch.no_grad():
        hf = float(torch.nn.functional.cross_entropy(m(x).logits.reshape(-1, m.config.vocab_size).double(), y.reshape(-1)))
    mine, why = trainer_loss(work, os.path.join(run, "model_00000003.bin"), x, y)
    ok = mine is not None and abs(hf - mine) <= 1e-5 * abs(mine) and m.config.hidden_act == "relu" and \
        type(m).__name__ == "LlamaForCausalLM" and "ReLU" in e.stdout
    check("a --mlp relu2 model exports to LlamaForCausalLM (hidden_act relu, gate_proj = up_proj): transformers' loss "
          "%.7f, the trainer's %s" % (hf, "%.7f" % mine if mine is not None else "-"), ok, why + e.stdout)
    back = os.path.join(work, "relu2_back.bin")
    i = script("import_hf.py", out, back)
    with open(os.path.join(run, "model_00000003.bin"), "rb") as f1:
        same = i.returncode == 0 and os.path.exists(back) and f1.read() == open(back, "rb").read()
    check("the ReLU² export imports back to the trained model file byte for byte (slot 21 = 1, wfc up alone)", same, i.stdout)


def test_geglu(work, t):
    """GeGLU (--mlp geglu, slot 21 = 3) is LlamaForCausalLM with hidden_act gelu_pytorch_tanh; ungated MLPs are refused.
    t: test_hf_llama's module (its model helpers), passed in as test_relu2's trainer_loss is."""
    m = t.randomize(t.LlamaForCausalLM(t.LlamaConfig(**dict(t.MINIMAL, hidden_act="gelu_pytorch_tanh", num_key_value_heads=2,
                                                      tie_word_embeddings=False))), 7)
    hf, binf, out = (os.path.join(work, "geglu" + e) for e in ("_hf", ".bin", "_out"))
    m.save_pretrained(hf)
    r = t.script("import_hf.py", hf, binf)
    slot = struct.unpack("<256i", t.read(binf)[:1024])[21] if r.returncode == 0 else None
    t.check("GeGLU (hidden_act gelu_pytorch_tanh) imports with header slot 21 = 3 (got %s)" % slot, slot == 3, r.stdout)
    x, y = (torch.randint(0, 300, (2, 48), generator=torch.Generator().manual_seed(77 + i)) for i in range(2))
    with torch.no_grad():
        ref = torch.nn.functional.cross_entropy(copy.deepcopy(m).double()(x).logits.reshape(-1, 300), y.reshape(-1)).item()
    loss, err = t.trainer_loss(work, binf, x, y) if slot == 3 else (None, "not imported")
    t.check("GeGLU: the trainer's loss %s equals transformers' %.7f (float64) within 1e-5 relative" % (
        "%.7f" % loss if loss is not None else "(none)", ref), loss is not None and abs(loss - ref) / ref <= 1e-5, err)
    r = t.script("export_hf.py", binf, out, "--no-tokenizer")
    oc = json.load(open(os.path.join(out, "config.json"))) if r.returncode == 0 else {}
    same = r.returncode == 0 and np.array_equal(t.logits(t.load_hf(out)[0], x), t.logits(m, x))
    t.check("GeGLU: exports as %s with hidden_act %s, logits equal the original's exactly" % (
        oc.get("architectures"), oc.get("hidden_act")), same and oc.get("hidden_act") == "gelu_pytorch_tanh", r.stdout)
    gelu = os.path.join(work, "gelu_run")  # ungated GELU in the Llama family: the trainer's own file
    t.test_hf.run([os.path.join(t.ROOT, "train_gpt_cpu"), "-e", "llama-d1", "--mlp", "gelu", "-x", "1", "-b", "1", "-t", "8",
                 "-v", "0", "-s", "0", "-o", gelu])
    t.expect_error("export of an ungated MLP (--mlp gelu, slot 21 = 2)", ["export_hf.py", os.path.join(gelu, "model_00000001.bin"),
                 os.path.join(work, "gelu_out")], ["slot 21 = 2", "without a gate"], os.path.join(work, "gelu_out"))


def doc_slots(path, heading):
    """{slot: field} of the table under `heading` in a doc ("| 2 | `maxT` | ..." rows; "a..b" ranges and "a, b" lists),
    and the first reserved slot (its row says "reserved")."""
    lines = open(os.path.join(ROOT, path)).read().split("\n")
    at = next(i for i, l in enumerate(lines) if l.startswith("#") and heading in l)
    slots, reserved = {}, None
    for l in lines[at + 1:]:
        if l.startswith("#"):
            break
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0][:1].isdigit():
            continue
        if "reserved" in l:
            reserved = int(cells[0].split(".")[0])
            continue
        keys = [k.strip() for k in cells[1].strip("`").split(",")] if "`" in cells[1] else None
        idx = [int(v) for v in cells[0].replace(" ", "").split(",")]
        for i, v in enumerate(idx):
            slots[v] = keys[i].strip("` ") if keys and i < len(keys) else cells[1]
    return slots, reserved


def test_header_table():
    """docs/huggingface.md's table of the Llama-family header names every slot the writers fill, with the scripts'
    field names, and where the reserved slots begin; docs/llama.md's table has the same slots; the C writer
    (arch/llama.h's llama_header_write) fills exactly those and its reader refuses from the same slot."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import llmc_llama as ll
    want = {i: k for k, i in ll.INT_SLOTS + ll.FLOAT_SLOTS}
    want.update({ll.ORIG_SLOT: "rope_orig", ll.MLP_SLOT: "mlp"})
    hf, hf_res = doc_slots("docs/huggingface.md", "The Llama-family header")
    ld, ld_res = doc_slots("docs/llama.md", "The model file")
    hf = {k: v for k, v in hf.items() if k > 1}  # magic and version: every file's
    ld = {k: v for k, v in ld.items() if k > 1}
    src = open(os.path.join(ROOT, "arch", "llama.h")).read()
    body = src[src.index("static void llama_header_write"):]
    body = body[:body.index("\n}\n")]
    c_slots = {int(i) for i in re.findall(r"h\[(\d+)\] =", body)} - {0, 1}
    c_res = int(re.search(r"for \(int k = (\d+); k < 256; k\+\+\)", src).group(1))
    ok = hf == want and hf_res == ll.RESERVED_FROM and set(ld) == set(want) and ld_res == ll.RESERVED_FROM and \
        c_slots == set(want) and c_res == ll.RESERVED_FROM
    check("the header tables of docs/huggingface.md and docs/llama.md, scripts/llmc_llama.py's slots and arch/llama.h's "
          "writer agree: slots 2..%d, reserved from %d" % (max(want), ll.RESERVED_FROM), ok,
          "huggingface.md %s (reserved %s)\nllama.md %s (reserved %s)\nllmc_llama.py %s (reserved %d)\nC writer %s "
          "(reader refuses from %d)" % (hf, hf_res, sorted(ld), ld_res, want, ll.RESERVED_FROM, sorted(c_slots), c_res))
