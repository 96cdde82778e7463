"""rand_shard.py OUT [TOKENS]: a token shard in llm.c's format (magic 20240520, version 1) of uniformly random
GPT-2 token ids (vocabulary 50,257; Python's random, seed 0), 2^24 tokens unless given. The benchmarks train on it,
so that no program is timed on a tokenizer or on one text's statistics. Plain Python: the CPU benchmarks run where
numpy may be missing."""
import random
import struct
import sys
from array import array

if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-"):  # --help must not become a 32 MiB file called --help
    sys.exit(__doc__ if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else "usage: " + __doc__.split(":")[0])
out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 24
random.seed(0)
toks = array("H", (random.randrange(50257) for _ in range(n)))
if sys.byteorder != "little":
    toks.byteswap()
with open(out, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(toks.tobytes())
