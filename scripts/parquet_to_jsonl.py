#!/usr/bin/env python3
"""
Streams one text column of Parquet files as JSON lines ({"text": ...}), the form
`./tokenize shards --in - --format jsonl` reads, so that the C tool needs no Arrow library.
Memory stays at one record batch (--batch-rows rows) whatever the files' size.

  python3 scripts/parquet_to_jsonl.py [--column text] FILE.parquet ... | \
      ./tokenize shards --in - --format jsonl --encoder E.json --merges V.bpe --out-dir D --name NAME

Needs pyarrow (pip install pyarrow). Used by scripts/fineweb.py.
"""
import argparse
import json
import sys


def stream_parquet(paths, column, out, batch_rows=1024):
    """Writes each row's `column` string to `out` as a JSON line; returns (rows written, null rows skipped)."""
    import pyarrow.parquet as pq
    rows = nulls = 0
    for path in paths:
        f = pq.ParquetFile(path)
        if column not in f.schema_arrow.names:
            raise SystemExit("%s: no column %r (columns: %s)" % (path, column, ", ".join(f.schema_arrow.names)))
        for batch in f.iter_batches(columns=[column], batch_size=batch_rows):
            lines = []
            for text in batch.column(0).to_pylist():
                if text is None:
                    nulls += 1
                    continue
                lines.append(json.dumps({"text": text}, ensure_ascii=False))
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
            rows += len(lines)
    return rows, nulls


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    ap.add_argument("--column", default="text", help="the text column (default: text)")
    ap.add_argument("--batch-rows", type=int, default=1024)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rows, nulls = stream_parquet(a.files, a.column, sys.stdout.buffer, a.batch_rows)
    print("%d rows streamed, %d null rows skipped" % (rows, nulls), file=sys.stderr)


if __name__ == "__main__":
    main()
