#!/usr/bin/env python3
"""The trainer's results against a reference run written by test/ref_train.py (GPT-2) or test/ref_train_llama.py
(the Llama family): the compare half of those references, in numpy alone.

    ref_compare.py --out-dir DIR --log LOG --ckpt-dir CK [--label L] [--tol-...]
        reads DIR/ref.npz (the reference's per-step loss, norm and lr; its final parameters and first moments, per
        tensor), the trainer's LOG and its checkpoint at the last step in CK; prints one PASS/FAIL line per check
        (per-step loss, norm and lr; every parameter tensor and every first-moment tensor within its own bound) and
        exits 1 on a failure. A reference of the Llama family is known by the tensor names its ref.npz records.

Why apart: the references need torch (and transformers), whose import alone costs ~2 CPU s; a suite compares ~20
runs against a few references (test/lib.sh's ref_against), and the comparison needs none of it.
"""
import argparse
import json
import os
import sys

import numpy as np

# the model files' magic numbers (docs/formats.md) and GPT-2's parameter tensors in the file's order: ref_gpt2.py,
# ref_train.py and ref_train_llama.py write the files with these
MODEL_MAGIC = 20240326
LLAMA_MAGIC = 20261126
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
GPT2_MUON = ("qkvw", "attprojw", "fcw", "fcprojw")  # GPT-2's tensors that hold Muon's matrices
LLAMA_MUON = ("wqkv", "wo", "wfc", "wproj")  # the Llama family's


def read_log(path):
    steps = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "step" in d and "loss" in d and "norm" in d:
                steps[d["step"]] = d
    return [steps[k] for k in sorted(steps)]


def split(flat, ref, prefix):
    out, off = {}, 0
    for n in PARAM_NAMES:
        k = ref[prefix + n].size
        out[n] = flat[off:off + k].astype(np.float64).reshape(ref[prefix + n].shape)
        off += k
    assert off == flat.size, (off, flat.size)
    return out


class Checks:
    """check(ok, what) prints one PASS/FAIL line (after the run's label) and counts the failures."""
    def __init__(self, label):
        self.label, self.fails = label, 0

    def __call__(self, ok, what):
        print(("PASS " if ok else "FAIL ") + self.label + what)
        self.fails += 0 if ok else 1


def compare_log(a, ref, check):
    """The trainer's log against the reference's per-step loss, norm and lr; False when its steps are not the
    reference's (nothing else can be compared then)."""
    S = len(ref["losses"])
    log = read_log(a.log)
    check(len(log) == S, f"the log has {len(log)} steps, the reference {S}")
    if len(log) != S:
        return False
    for key, ref_key, tol in (("loss", "losses", a.tol_loss), ("norm", "norms", a.tol_norm), ("lr", "lrs", 1e-6)):
        got = np.array([d[key] if d[key] is not None else np.inf for d in log], dtype=np.float64)
        rel = np.abs(got - ref[ref_key]) / np.abs(ref[ref_key])
        check(bool(np.all(rel <= tol)), f"{key} at every step within {tol:g} relative (worst {rel.max():.2e} at step "
              f"{rel.argmax() + 1}: {got[rel.argmax()]:.7g} vs {ref[ref_key][rel.argmax()]:.7g})")
    return True


def read_checkpoint(ckpt_dir, S):
    """The model file's header and parameters and the state file's AdamW moments (m then v) at step S."""
    with open(os.path.join(ckpt_dir, f"model_{S:08d}.bin"), "rb") as f:
        hdr = np.frombuffer(f.read(1024), dtype="<i4")
        params = np.frombuffer(f.read(), dtype="<f4")
    with open(os.path.join(ckpt_dir, f"state_{S:08d}.bin"), "rb") as f:
        f.read(1024)
        mv = np.frombuffer(f.read(), dtype="<f4")
    return hdr, params, mv


def state_words(a):
    return "Adafactor state" if a.optimizer == "adafactor" else "AdamW first-moment"


def compare_gpt2(a, ref):
    S = len(ref["losses"])
    check = Checks(a.label)
    if not compare_log(a, ref, check):
        return 1
    hdr, params, mv = read_checkpoint(a.ckpt_dir, S)
    P = params.size
    check(hdr[0] == MODEL_MAGIC and mv.size == 2 * P, f"checkpoint at step {S}: model and state files hold {P} parameters")
    p, m = split(params, ref, "p_"), split(mv[:P], ref, "m_")
    # Each tensor's error is measured against how far training moved it (the parameters) or against
    # its own size (the moments), so a tensor that is wrong cannot hide behind others that are right.
    bad_p, bad_m, worst_p, worst_m, worst_rel = [], [], (0, ""), (0, ""), (0, "")
    for n in PARAM_NAMES:
        rp, r0, rm, gp, gm = ref["p_" + n], ref["p0_" + n], ref["m_" + n], p[n], m[n]
        if n == "qkvb":
            # The key bias adds the same amount to every score of a query, which the softmax ignores: its
            # gradient is zero in exact arithmetic, so what AdamW does with it is normalised rounding noise.
            # Compare the query and value thirds only.
            keep = np.ones(rp.shape[-1], dtype=bool)
            C = rp.shape[-1] // 3
            keep[C:2 * C] = False
            rp, r0, rm, gp, gm = rp[..., keep], r0[..., keep], rm[..., keep], gp[..., keep], gm[..., keep]
        bad_p, bad_m, worst_p, worst_m, worst_rel = score_tensor(a, n, rp, r0, rm, gp, gm, bad_p, bad_m, worst_p, worst_m, worst_rel, 9)
    if a.tol_param_abs > 0:
        worst = max((float(np.abs(p[n] - ref["p_" + n]).max()), n) for n in GPT2_MUON)
        check(worst[0] <= a.tol_param_abs, f"every parameter of Muon's tensors ({', '.join(GPT2_MUON)}) within "
              f"{a.tol_param_abs:g} (worst {worst[1]} {worst[0]:.2e})")
    if a.tol_param_rel > 0:  # (qkvb's key third left out, as above)
        worst = worst_rel
        check(worst[0] <= a.tol_param_rel, f"all 16 parameter tensors within {a.tol_param_rel:g} of their own size "
              f"(worst {worst[1]} {worst[0]:.2e})")
    V = int(ref["V"])
    check(not bad_p, f"all 16 parameter tensors within {a.tol_param:g} of their movement (worst {worst_p[1]} "
          f"{worst_p[0]:.2e})" + ("; off: " + ", ".join(bad_p) if bad_p else ""))
    check(not bad_m, f"all 16 {state_words(a)} tensors within {a.tol_moment:g} relative (worst {worst_m[1]} "
          f"{worst_m[0]:.2e})" + ("; off: " + ", ".join(bad_m) if bad_m else ""))
    check(bool(np.all(p["wte"][V:] == 0)), "the padded vocabulary rows of wte stay exactly zero")
    return 1 if check.fails else 0


def score_tensor(a, n, rp, r0, rm, gp, gm, bad_p, bad_m, worst_p, worst_m, worst_rel, width):
    """One tensor against the reference: its parameters' error over their movement, its first moments' relative
    error, its parameters' error over their size; the lists of tensors off and the worst of each, updated."""
    ep = np.linalg.norm(gp - rp) / np.linalg.norm(rp - r0)
    em = np.linalg.norm(gm - rm) / np.linalg.norm(rm)
    worst_rel = max(worst_rel, (float(np.linalg.norm(gp - rp) / np.linalg.norm(rp)), n))
    if a.verbose: print(f"    {n:{width}s} params {ep:.2e} of their movement, first moments {em:.2e}")
    if ep > a.tol_param: bad_p.append(f"{n} {ep:.2e}")
    if em > a.tol_moment: bad_m.append(f"{n} {em:.2e}")
    return bad_p, bad_m, max(worst_p, (ep, n)), max(worst_m, (em, n)), worst_rel


def compare_llama(a, ref):
    S, names = len(ref["losses"]), [str(n) for n in ref["names"]]
    check = Checks(a.label)
    if not compare_log(a, ref, check):
        return 1
    hdr, params, mv = read_checkpoint(a.ckpt_dir, S)
    P = params.size
    check(hdr[0] == LLAMA_MAGIC and mv.size == 2 * P, f"checkpoint at step {S}: a Llama model file and a state of {P} parameters")
    bad_p, bad_m, worst_p, worst_m, worst_rel, off = [], [], (0, ""), (0, ""), (0, ""), 0
    V = int(ref["V"])
    pads_zero = True
    for n in names:
        rp, r0, rm = ref["p_" + n], ref["p0_" + n], ref["m_" + n]
        k = rp.size
        gp, gm = params[off:off + k].reshape(rp.shape).astype(np.float64), mv[off:off + k].reshape(rp.shape).astype(np.float64)
        off += k
        if n in ("wte", "lm_head"):
            pads_zero = pads_zero and bool(np.all(gp[V:] == 0))
        bad_p, bad_m, worst_p, worst_m, worst_rel = score_tensor(a, n, rp, r0, rm, gp, gm, bad_p, bad_m, worst_p, worst_m, worst_rel, 10)
    if a.tol_param_abs > 0:
        worst, off2 = (0.0, ""), 0
        for n in names:
            rp = ref["p_" + n]
            gp = params[off2:off2 + rp.size].reshape(rp.shape).astype(np.float64)
            off2 += rp.size
            if n in LLAMA_MUON:
                worst = max(worst, (float(np.abs(gp - rp).max()), n))
        check(worst[0] <= a.tol_param_abs, f"every parameter of Muon's tensors ({', '.join(LLAMA_MUON)}) within "
              f"{a.tol_param_abs:g} (worst {worst[1]} {worst[0]:.2e})")
    if a.tol_param_rel > 0:
        check(worst_rel[0] <= a.tol_param_rel, f"all {len(names)} parameter tensors within {a.tol_param_rel:g} of their own "
              f"size (worst {worst_rel[1]} {worst_rel[0]:.2e})")
    check(off == P, f"the checkpoint holds the reference's {off} parameters in the file's order ({P})")
    check(not bad_p, f"all {len(names)} parameter tensors within {a.tol_param:g} of their movement (worst {worst_p[1]} "
          f"{worst_p[0]:.2e})" + ("; off: " + ", ".join(bad_p) if bad_p else ""))
    check(not bad_m, f"all {len(names)} {state_words(a)} tensors within {a.tol_moment:g} relative (worst {worst_m[1]} "
          f"{worst_m[0]:.2e})" + ("; off: " + ", ".join(bad_m) if bad_m else ""))
    check(pads_zero, "the padded vocabulary rows stay exactly zero")
    return 1 if check.fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True, help="the reference's directory (its ref.npz)")
    ap.add_argument("--log", required=True)
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--tol-loss", type=float, default=1e-5)
    ap.add_argument("--tol-norm", type=float, default=1e-4)
    ap.add_argument("--tol-param", type=float, default=1e-3)
    ap.add_argument("--tol-moment", type=float, default=1e-4)
    ap.add_argument("--tol-param-rel", type=float, default=0.0, help="> 0: every tensor's parameters within this of their own size")
    ap.add_argument("--tol-param-abs", type=float, default=0.0, help="> 0: also every parameter of Muon's tensors within this, absolute")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "muon", "adafactor"], help="what the state file's m holds (the words only)")
    ap.add_argument("--verbose", action="store_true", help="print every tensor's errors")
    a = ap.parse_args()
    ref = np.load(os.path.join(a.out_dir, "ref.npz"))
    return compare_llama(a, ref) if "names" in ref.files else compare_gpt2(a, ref)


if __name__ == "__main__":
    sys.exit(main())
