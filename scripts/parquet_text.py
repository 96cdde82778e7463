#!/usr/bin/env python3
"""
Streams one text column of Parquet files to standard output for `./tokenize shards --in -`, so
that the C tool needs no Arrow library. Memory stays at one record batch (--batch-rows rows).

  python3 scripts/parquet_text.py FILE.parquet ... | ./tokenize shards --in - --format framed ...
  python3 scripts/parquet_text.py --jsonl FILE.parquet ... | ./tokenize shards --in - --format jsonl ...

framed (the default, what scripts/fineweb.py uses): each document is an 8-byte little-endian
byte count, then its UTF-8 bytes, copied straight from Arrow's string buffers: no JSON to encode
in Python, which would otherwise be slower than the tokenizer's threads. --jobs N decodes row groups
in N processes (pyarrow decodes about 300 MB of text a CPU-second, the tokenizer 37 MB a thread).
--jsonl writes
{"text": ...} lines instead (readable, and what other tools take). Null rows are skipped.
Needs pyarrow (pip install pyarrow).
"""
import argparse
import json
import struct
import sys


def framed_chunk(arr):
    """The framed bytes of one Arrow string array (nulls skipped), and its number of documents."""
    import pyarrow as pa
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        fmt = "i"
    elif pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        fmt = "q"
    else:
        raise SystemExit("parquet_text.py: the column has type %s, expected strings" % arr.type)
    _, offs_buf, data_buf = arr.buffers()
    offs = memoryview(offs_buf).cast(fmt)[arr.offset:arr.offset + len(arr) + 1]
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    nulls = arr.is_null().to_pylist() if arr.null_count else None
    out, n, pack = [], 0, struct.Struct("<Q").pack
    for i in range(len(arr)):
        if nulls is not None and nulls[i]:
            continue
        a, b = offs[i], offs[i + 1]
        out.append(pack(b - a))
        out.append(data[a:b])
        n += 1
    return b"".join(out), n


def stream_parquet(paths, column, out, batch_rows=1024, jsonl=False):
    """Writes each row's `column` text to `out`; returns (documents written, null rows skipped)."""
    import pyarrow.parquet as pq
    rows = nulls = 0
    for path in paths:
        f = pq.ParquetFile(path)
        if column not in f.schema_arrow.names:
            raise SystemExit("%s: no column %r (columns: %s)" % (path, column, ", ".join(f.schema_arrow.names)))
        for batch in f.iter_batches(columns=[column], batch_size=batch_rows):
            arr = batch.column(0)
            nulls += arr.null_count
            if jsonl:
                texts = [t for t in arr.to_pylist() if t is not None]
                if texts:
                    out.write("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode())
                rows += len(texts)
            else:
                data, n = framed_chunk(arr)
                out.write(data)
                rows += n
    return rows, nulls


def framed_row_group(path, index, column):
    """One row group's text, framed: a task for stream_parquet_parallel's worker processes."""
    import pyarrow.parquet as pq
    table = pq.ParquetFile(path).read_row_group(index, columns=[column])
    parts, rows = [], 0
    for chunk in table.column(0).chunks:
        data, n = framed_chunk(chunk)
        parts.append(data)
        rows += n
    return b"".join(parts), rows, table.column(0).null_count


def stream_parquet_parallel(paths, column, out, jobs):
    """stream_parquet's framed output, with row groups decoded by `jobs` processes and written in order; at most
    2 * jobs row groups are in flight, so memory stays bounded when the reader of `out` is slower."""
    import collections
    import multiprocessing
    import pyarrow.parquet as pq
    tasks = []
    for path in paths:
        f = pq.ParquetFile(path)
        if column not in f.schema_arrow.names:
            raise SystemExit("%s: no column %r (columns: %s)" % (path, column, ", ".join(f.schema_arrow.names)))
        tasks += [(path, i, column) for i in range(f.num_row_groups)]
    rows = nulls = 0
    with multiprocessing.Pool(jobs) as pool:
        pending = collections.deque()
        for i, task in enumerate(tasks + [None] * (2 * jobs)):
            if task is not None:
                pending.append(pool.apply_async(framed_row_group, task))
            if len(pending) > 2 * jobs or (task is None and pending):
                data, n, z = pending.popleft().get()
                out.write(data)
                rows, nulls = rows + n, nulls + z
    return rows, nulls


def main():
    ap = argparse.ArgumentParser(description="a Parquet text column to ./tokenize shards")
    ap.add_argument("--column", default="text", help="the text column (default: text)")
    ap.add_argument("--jsonl", action="store_true", help="JSON lines instead of the framed format")
    ap.add_argument("--batch-rows", type=int, default=1024)
    ap.add_argument("--jobs", type=int, default=1, help="processes decoding row groups (framed only; default 1)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.jobs > 1 and not a.jsonl:
        rows, nulls = stream_parquet_parallel(a.files, a.column, sys.stdout.buffer, a.jobs)
    else:
        rows, nulls = stream_parquet(a.files, a.column, sys.stdout.buffer, a.batch_rows, a.jsonl)
    print("%d documents streamed, %d null rows skipped" % (rows, nulls), file=sys.stderr)


if __name__ == "__main__":
    main()
