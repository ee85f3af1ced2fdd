"""A Delta table of many tiny data files, made fast: one small Parquet file written once and copied ``files``
times, and a log written as JSON directly (add actions with statistics that match the copies), as another
writer (not dal) would leave it. For register, sync, ``dal head`` and ``dal stats`` at 5,000 to 50,000 files.

    python benchmarks/many_files.py /tmp/t50k --files 50000 --commits 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 10  # rows per file: ids 0..9, x = id / 4 (x NULL in the last row), s = "r<id>"

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("x", "double"), ("s", "string"), ("part", "integer"))
    ],
}


def template() -> pa.Table:
    ids = list(range(ROWS))
    xs = [i / 4 for i in ids[:-1]] + [None]
    return pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(xs, pa.float64()), "s": [f"r{i}" for i in ids]})


def _stats() -> str:
    return json.dumps(
        {
            "numRecords": ROWS,
            "minValues": {"id": 0, "x": 0.0, "s": "r0"},
            "maxValues": {"id": ROWS - 1, "x": (ROWS - 2) / 4, "s": "r9"},
            "nullCount": {"id": 0, "x": 1, "s": 0},
        }
    )


def _rel(i: int, parts: int) -> str:
    return f"part={i % parts}/f-{i:07d}.parquet"


def commit(
    root: str, version: int, adds: range, size: int, parts: int, header: bool, removes: range = range(0)
) -> None:
    """Commit ``version``: the files numbered ``adds`` (written here as copies of the template), and the removal
    of the files numbered ``removes`` (left on disk, as a table before VACUUM)."""
    src = os.path.join(root, "_template.parquet")
    lines = [json.dumps({"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}})]
    for i in removes:
        remove = {"path": _rel(i, parts), "deletionTimestamp": 1_700_000_000_000, "dataChange": True}
        lines.append(json.dumps({"remove": remove}))
    if header:
        lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
        meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA), "partitionColumns": ["part"], "configuration": {},
                "createdTime": 1_700_000_000_000}  # fmt: skip
        lines.append(json.dumps({"metaData": meta}))
    stats = _stats()
    made: set[str] = set()
    for i in adds:
        part = i % parts
        rel = _rel(i, parts)
        folder = os.path.join(root, f"part={part}")
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        shutil.copyfile(src, os.path.join(root, rel))
        add = {"path": rel, "partitionValues": {"part": str(part)}, "size": size,
               "modificationTime": 1_700_000_000_000, "dataChange": True, "stats": stats}  # fmt: skip
        lines.append(json.dumps({"add": add}))
    log = os.path.join(root, "_delta_log")
    os.makedirs(log, exist_ok=True)
    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def make_table(root: str, files: int, *, commits: int = 1, parts: int = 100) -> int:
    """A table at ``root`` of ``files`` files of ``ROWS`` rows in ``commits`` commits; returns its newest version."""
    os.makedirs(root, exist_ok=True)
    src = os.path.join(root, "_template.parquet")
    pq.write_table(template(), src)
    size = os.path.getsize(src)
    per = -(-files // commits)
    for k in range(commits):
        commit(root, k, range(k * per, min(files, (k + 1) * per)), size, parts, header=k == 0)
    os.remove(src)
    return commits - 1


def append(root: str, first: int, files: int, *, parts: int = 100, removes: range = range(0)) -> int:
    """One more commit adding files ``first .. first + files - 1`` (and removing the files numbered
    ``removes``); returns its version."""
    log = os.path.join(root, "_delta_log")
    version = max(int(n[:20]) for n in os.listdir(log) if n.endswith(".json")) + 1
    src = os.path.join(root, "_template.parquet")
    pq.write_table(template(), src)
    commit(root, version, range(first, first + files), os.path.getsize(src), parts, header=False, removes=removes)
    os.remove(src)
    return version


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--commits", type=int, default=1)
    ap.add_argument("--parts", type=int, default=100)
    args = ap.parse_args()
    t = time.perf_counter()
    make_table(args.root, args.files, commits=args.commits, parts=args.parts)
    print(f"{args.files:,} files in {args.commits} commit(s) at {args.root} in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
