#!/usr/bin/python3
"""test_llama_train.py: the trainer's own Llama-family forward and backward (model/model.h's block as train_gpt_cpu runs
it, through test/hf_forward) against transformers' autograd, on small random models saved by transformers and
imported with scripts/import_hf.py: the logits, the loss and every parameter's gradient, relative error <= 1e-5
(transformers in float64, so the bound is on the trainer's fp32 error alone). The models cover GQA 4:1 and 1:1
(MHA) and 2:1, tied and untied heads, q/k/v bias (Qwen2ForCausalLM), QK-norm with head_dim != C/NH (Qwen 3; in
transformers 4.45 the LlamaForCausalLM-based stand-in of test_hf_llama.py) and Llama 3.1's RoPE scaling.
Needs torch and transformers (TORCH_PYTHON) and a built test/hf_forward. Prints PASS/FAIL per check and the
"N passed, N failed" line run_tests.sh counts.

    test/test_llama_train.py [--work DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_hf_llama as H  # noqa: E402  (its models, the Qwen 3 stand-in, randomize; it SKIPs without torch)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

ROOT = os.path.dirname(HERE)
HF_FORWARD = os.path.join(ROOT, "test", "hf_forward")
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok or not detail else ": " + detail[-1500:]))
    sys.stdout.flush()


def models():
    out = H.models()
    base = dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, max_position_embeddings=64, hidden_act="silu")
    m = LlamaForCausalLM(LlamaConfig(**base, intermediate_size=96, num_attention_heads=4, num_key_value_heads=4,
                                     rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True))
    out.append(("LlamaForCausalLM, MHA 1:1 (4 heads, 4 kv), tied", H.randomize(m, 5), lambda m, d: m.save_pretrained(d)))
    return out


def file_order_grads(m, Vp):
    """transformers' gradients laid out as the trainer's model file orders the tensors (docs/llama.md)."""
    sd = dict(m.named_parameters())
    g = lambda n: sd[n].grad.double().numpy()  # noqa: E731
    cfg = m.config
    L = cfg.num_hidden_layers
    pad = lambda w: np.concatenate([w, np.zeros((Vp - w.shape[0], w.shape[1]))])  # noqa: E731
    lay = lambda f: np.stack([f("model.layers.%d." % l) for l in range(L)])  # noqa: E731
    out = [("wte", pad(g("model.embed_tokens.weight")))]
    out.append(("attn_norm", lay(lambda p: g(p + "input_layernorm.weight"))))
    out.append(("wqkv", lay(lambda p: np.concatenate([g(p + "self_attn.%s_proj.weight" % x) for x in "qkv"]))))
    if p_has(sd, "model.layers.0.self_attn.q_proj.bias"):
        out.append(("bqkv", lay(lambda p: np.concatenate([g(p + "self_attn.%s_proj.bias" % x) for x in "qkv"]))))
    if p_has(sd, "model.layers.0.self_attn.q_norm.weight"):
        out.append(("q_norm", lay(lambda p: g(p + "self_attn.q_norm.weight"))))
        out.append(("k_norm", lay(lambda p: g(p + "self_attn.k_norm.weight"))))
    out.append(("wo", lay(lambda p: g(p + "self_attn.o_proj.weight"))))
    out.append(("mlp_norm", lay(lambda p: g(p + "post_attention_layernorm.weight"))))
    out.append(("wfc", lay(lambda p: np.concatenate([g(p + "mlp.up_proj.weight"), g(p + "mlp.gate_proj.weight")]))))
    out.append(("wproj", lay(lambda p: g(p + "mlp.down_proj.weight"))))
    out.append(("final_norm", g("model.norm.weight")))
    if not cfg.tie_word_embeddings:
        out.append(("lm_head", pad(g("lm_head.weight"))))
    return out


def p_has(sd, name):
    return name in sd


def test_model(work, i, label, m, save):
    hf = os.path.join(work, "m%d_hf" % i)
    save(m, hf)
    binf = os.path.join(work, "m%d.bin" % i)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "import_hf.py"), hf, binf], capture_output=True,
                       text=True)
    if r.returncode != 0:
        check("%s: imports" % label, False, r.stdout + r.stderr)
        return
    B, T, V = 2, 16, m.config.vocab_size
    Vp = (V + 127) // 128 * 128
    gen = torch.Generator().manual_seed(100 + i)
    x = torch.randint(0, V, (B, T), generator=gen)
    y = torch.randint(0, V, (B, T), generator=gen)
    tok, tgt, lo, gr = (os.path.join(work, "m%d.%s" % (i, e)) for e in ("tok", "tgt", "logits", "grads"))
    x.numpy().astype(np.int32).tofile(tok)
    y.numpy().astype(np.int32).tofile(tgt)
    r1 = subprocess.run([HF_FORWARD, "logits", binf, tok, str(B), str(T), lo], capture_output=True, text=True)
    r2 = subprocess.run([HF_FORWARD, "grads", binf, tok, tgt, str(B), str(T), gr], capture_output=True, text=True)
    if r1.returncode != 0 or r2.returncode != 0:
        check("%s: test/hf_forward runs" % label, False, r1.stderr + r2.stderr)
        return
    md = m.double()
    md.zero_grad()
    logits = md(x).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    loss.backward()
    want = logits.detach().numpy()
    got = np.fromfile(lo, dtype=np.float32).reshape(B, T, V)
    d = float(np.abs(got - want).max() / np.abs(want).max())
    check("%s: the trainer's logits equal transformers' (max |diff| / max |logit| %.1e <= 1e-5)" % (label, d), d <= 1e-5)
    raw = np.fromfile(gr, dtype=np.float32)
    dl = abs(float(raw[0]) - loss.item()) / abs(loss.item())
    check("%s: the trainer's loss %.7f equals transformers' %.7f (relative %.1e <= 1e-5)" % (label, raw[0], loss.item(), dl),
          dl <= 1e-5)
    flat, off, worst, wname, sizes_ok = raw[1:], 0, 0.0, "", True
    for name, w in file_order_grads(md, Vp):
        n = w.size
        if off + n > flat.size:
            sizes_ok = False
            break
        mine = flat[off:off + n].reshape(w.shape)
        e = float(np.abs(mine - w).max() / max(np.abs(w).max(), 1e-30))
        if e > worst:
            worst, wname = e, name
        off += n
    sizes_ok = sizes_ok and off == flat.size
    check("%s: every parameter's gradient equals transformers' (worst tensor %s: max |diff| / max |grad| %.1e <= 1e-5; "
          "%d floats in the file's order)" % (label, wname, worst, off), sizes_ok and worst <= 1e-5,
          "sizes %s (%d of %d)" % (sizes_ok, off, flat.size))


def test_recompute(work, i, label):
    """Every recompute level trains the same numbers (the block rebuilds what a level drops, bit for bit)."""
    binf = os.path.join(work, "m%d.bin" % i)
    logs = []
    for r in range(4):
        out = subprocess.run([os.path.join(ROOT, "train_gpt_cpu"), "-e", binf, "-x", "3", "-b", "2", "-t", "16", "-v", "0",
                              "-s", "0", "-r", str(r)], capture_output=True, text=True)
        logs.append([l.split("|")[1:4] for l in out.stdout.splitlines() if l.startswith("step ") and "/3 |" in l])
    check("%s: 3 training steps at recompute 0, 1, 2 and 3 give bit-identical losses and norms (%s)"
          % (label, logs[0][-1][0].strip() if logs[0] else "no steps"), len(logs[0]) == 3 and all(l == logs[0] for l in logs))


def test_greedy(work, i, label, m):
    """The trainer's sampling path (the key/value-cached decode, hf_forward greedy) generates transformers' tokens."""
    binf = os.path.join(work, "m%d.bin" % i)
    prompt = [5, 17, 42]
    m.generation_config.eos_token_id = None  # LlamaConfig's default eos id 2 would stop it early
    with torch.no_grad():
        want = m.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=0)[0].tolist()[3:]
    out = subprocess.run([HF_FORWARD, "greedy", binf, "12", "1"] + [str(t) for t in prompt], capture_output=True, text=True)
    got = [int(t) for t in out.stdout.splitlines()[0].split()[1:]] if out.returncode == 0 and out.stdout else []
    check("%s: greedy generation through the trainer's key/value cache equals transformers' generate() (12 tokens, "
          "%d distinct)" % (label, len(set(want))), got == want and len(set(want)) >= 3, "%s vs %s %s" % (got, want, out.stderr))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="test_llama_train.")
    try:
        torch.manual_seed(0)
        ms = models()
        for i, (label, m, save) in enumerate(ms):
            test_model(work, i, label, m, save)
        for i in (0, 3):  # GQA untied; QK-norm with its kept pre-norm q/k and statistics
            test_recompute(work, i, ms[i][0])
        for i in (1, 3):  # MQA with llama3 RoPE; QK-norm
            test_greedy(work, i, ms[i][0], ms[i][1])
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
