"""llmc_hf.py: what scripts/export_hf.py and scripts/import_hf.py share: reading and writing llm.c model
files (version 3 fp32, version 5 bf16, padded vocabulary), reading and writing safetensors files, and the
mapping between llm.c's 16 parameter tensors and Hugging Face's GPT2LMHeadModel names.

Only numpy is needed. bf16 has no numpy type, so bf16 tensors travel as uint16 arrays of their raw bits
and are never converted unless asked: a v5 file exported and imported back is the same bytes.
Every error is a HFError whose text names the file and the field; the scripts print it and exit 1.
"""
import contextlib
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:  # numpy is the scripts' one dependency: say so, not a traceback
    sys.exit(f"error: {os.path.basename(sys.argv[0])} needs numpy: pip install numpy (or apt-get install python3-numpy)")

MODEL_MAGIC = 20240326
STATE_NAME = "state_%08d.bin"
MODEL_NAME = "model_%08d.bin"

# llm.c's parameter order; shape as a function of (Vp, maxT, L, C)
LLMC_TENSORS = [
    ("wte", lambda d: (d["Vp"], d["C"])), ("wpe", lambda d: (d["maxT"], d["C"])),
    ("ln1w", lambda d: (d["L"], d["C"])), ("ln1b", lambda d: (d["L"], d["C"])),
    ("qkvw", lambda d: (d["L"], 3 * d["C"], d["C"])), ("qkvb", lambda d: (d["L"], 3 * d["C"])),
    ("attprojw", lambda d: (d["L"], d["C"], d["C"])), ("attprojb", lambda d: (d["L"], d["C"])),
    ("ln2w", lambda d: (d["L"], d["C"])), ("ln2b", lambda d: (d["L"], d["C"])),
    ("fcw", lambda d: (d["L"], 4 * d["C"], d["C"])), ("fcb", lambda d: (d["L"], 4 * d["C"])),
    ("fcprojw", lambda d: (d["L"], d["C"], 4 * d["C"])), ("fcprojb", lambda d: (d["L"], d["C"])),
    ("lnfw", lambda d: (d["C"],)), ("lnfb", lambda d: (d["C"],)),
]
# per-layer tensors: llm.c name -> (Hugging Face name under h.{i}., transposed?). GPT-2's Conv1D keeps
# its weight as (in, out), llm.c as (out, in) like nn.Linear, hence the transposes.
LAYER_MAP = {
    "ln1w": ("ln_1.weight", False), "ln1b": ("ln_1.bias", False),
    "qkvw": ("attn.c_attn.weight", True), "qkvb": ("attn.c_attn.bias", False),
    "attprojw": ("attn.c_proj.weight", True), "attprojb": ("attn.c_proj.bias", False),
    "ln2w": ("ln_2.weight", False), "ln2b": ("ln_2.bias", False),
    "fcw": ("mlp.c_fc.weight", True), "fcb": ("mlp.c_fc.bias", False),
    "fcprojw": ("mlp.c_proj.weight", True), "fcprojb": ("mlp.c_proj.bias", False),
}
OUTER_MAP = {"wte": "wte.weight", "wpe": "wpe.weight", "lnfw": "ln_f.weight", "lnfb": "ln_f.bias"}

ST_DTYPES = {"F32": (np.float32, 4), "BF16": (np.uint16, 2), "F16": (np.float16, 2), "F64": (np.float64, 8)}


class HFError(Exception):
    pass


def padded_vocab(v):
    return (v + 127) // 128 * 128


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f):
    """Round to nearest even, as torch does (NaN stays NaN)."""
    u = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded[nan] = 0x7FC0
    return rounded


# ---------------------------------------------------------------- llm.c model files

def open_model_file(path, expected, header=1024):
    """(f, size, raw): a model file of the llm.c kind (GPT-2's here, the Llama family's and llm.c's llama3 branch's in
    llmc_llama.py) open for reading, its size, and its first `header` bytes (at least the 1,024 of the 256 int32s every
    such header starts with). The errors name the file and what it was expected to be."""
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
        raw = f.read(header)
    except OSError as e:
        raise HFError("%s: cannot open: %s (expected %s)" % (path, e.strerror, expected))
    if len(raw) < 1024:
        f.close()
        raise HFError("%s: %d bytes, too short for the 1,024-byte header of %s" % (path, len(raw), expected))
    return f, size, raw


def read_llmc(path):
    """Returns (dims, tensors, bf16): dims has V, Vp, maxT, L, NH, C; tensors maps llm.c names to arrays
    (float32, or uint16 bf16 bits when bf16)."""
    f, size, raw = open_model_file(path, "an llm.c model file")
    with f:
        h = struct.unpack("<256i", raw)
        if h[0] != MODEL_MAGIC:
            raise HFError("%s: header[0] (magic) is %d, expected %d (not an llm.c model file?)" % (path, h[0], MODEL_MAGIC))
        if h[1] not in (3, 5):
            raise HFError("%s: header[1] (version) is %d, expected 3 (fp32) or 5 (bf16)" % (path, h[1]))
        d = {"maxT": h[2], "V": h[3], "L": h[4], "NH": h[5], "C": h[6], "Vp": h[7]}
        for k in ("maxT", "V", "L", "NH", "C", "Vp"):
            if d[k] <= 0:
                raise HFError("%s: header field %s is %d, expected a positive number" % (path, k, d[k]))
        if d["Vp"] < d["V"] or d["C"] % d["NH"]:
            raise HFError("%s: header has padded vocab %d < vocab %d or channels %d not divisible by heads %d"
                          % (path, d["Vp"], d["V"], d["C"], d["NH"]))
        bf16 = h[1] == 5
        width = 2 if bf16 else 4
        shapes = [(n, fn(d)) for n, fn in LLMC_TENSORS]
        want = 1024 + width * sum(int(np.prod(s)) for _, s in shapes)
        if size != want:
            raise HFError("%s: %d bytes, expected %d for L=%d C=%d V=%d Vp=%d maxT=%d version %d (truncated?)"
                          % (path, size, want, d["L"], d["C"], d["V"], d["Vp"], d["maxT"], h[1]))
        tensors = {}
        for name, shape in shapes:
            n = int(np.prod(shape))
            tensors[name] = np.frombuffer(f.read(n * width), dtype="<u2" if bf16 else "<f4").reshape(shape)
    return d, tensors, bf16


@contextlib.contextmanager
def atomic_file(path):
    """A file written under a temporary name beside path, fsynced and renamed over path when the block ends: a
    failure (the block's, or the disk's) removes the temporary and leaves nothing half-written."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_llmc(path, d, tensors, bf16):
    """Writes to a temporary name beside path, then renames: a failure leaves nothing half-written."""
    h = [0] * 256
    h[0], h[1] = MODEL_MAGIC, 5 if bf16 else 3
    h[2], h[3], h[4], h[5], h[6], h[7] = d["maxT"], d["V"], d["L"], d["NH"], d["C"], d["Vp"]
    with atomic_file(path) as f:
        f.write(struct.pack("<256i", *h))
        for name, fn in LLMC_TENSORS:
            a = tensors[name]
            assert a.shape == fn(d), (name, a.shape, fn(d))
            f.write(np.ascontiguousarray(a, dtype="<u2" if bf16 else "<f4").tobytes())


def latest_checkpoint(out_dir):
    """The model file of the newest complete checkpoint (state file present beside its model file)."""
    best = None
    for name in os.listdir(out_dir):
        if len(name) == len(STATE_NAME % 0) and name.startswith("state_") and name.endswith(".bin"):
            try:
                step = int(name[6:14])
            except ValueError:
                continue
            if os.path.exists(os.path.join(out_dir, MODEL_NAME % step)) and (best is None or step > best):
                best = step
    if best is None:
        raise HFError("%s: no complete checkpoint (state_SSSSSSSS.bin beside model_SSSSSSSS.bin) in this directory" % out_dir)
    return os.path.join(out_dir, MODEL_NAME % best)


# ---------------------------------------------------------------- safetensors

def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, array, dtype tag). Header padded with spaces to 8 bytes, data in the
    listed order."""
    header, off = {"__metadata__": metadata}, 0
    for name, a, tag in tensors:
        n = a.size * ST_DTYPES[tag][1]
        header[name] = {"dtype": tag, "shape": list(a.shape), "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name, a, tag in tensors:
            f.write(np.ascontiguousarray(a, dtype=np.dtype(ST_DTYPES[tag][0]).newbyteorder("<")).tobytes())
        f.flush()
        os.fsync(f.fileno())


def read_safetensors(path):
    """Returns {name: (array, dtype tag)} with arrays memory-mapped; checks every offset against the
    file's size, so a truncated file is an error naming the first tensor it cuts."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise HFError("%s: cannot open: %s" % (path, e.strerror))
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise HFError("%s: %d bytes, too short for the safetensors header length (8 bytes)" % (path, len(raw)))
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            raise HFError("%s: header length %d runs past the end of the file (%d bytes; truncated?)" % (path, n, size))
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise HFError("%s: the safetensors header is not valid JSON (%s)" % (path, e))
    if not isinstance(header, dict):
        raise HFError("%s: the safetensors header is not a JSON object" % path)
    data_len = size - 8 - n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            tag, shape, (b, e) = info["dtype"], [int(x) for x in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise HFError("%s: tensor '%s': header entry lacks dtype, shape or data_offsets" % (path, name))
        if tag not in ST_DTYPES:
            raise HFError("%s: tensor '%s': dtype %s, expected one of %s" % (path, name, tag, ", ".join(ST_DTYPES)))
        dt, width = ST_DTYPES[tag]
        count = int(np.prod(shape)) if shape else 1
        if e - b != count * width or b < 0:
            raise HFError("%s: tensor '%s': data_offsets [%d, %d) do not hold shape %s of %s" % (path, name, b, e, shape, tag))
        if e > data_len:
            raise HFError("%s: tensor '%s' needs bytes [%d, %d) of the data, the file holds %d (truncated?)"
                          % (path, name, b, e, data_len))
        a = np.memmap(path, dtype=np.dtype(dt).newbyteorder("<"), mode="r", offset=8 + n + b, shape=tuple(shape))
        out[name] = (a, tag)
    return out
