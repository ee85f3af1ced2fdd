"""Synthetic Delta tables of many files, written as a log directly (JSON commits + a checkpoint by delta-rs), for
planning at scale: only the files a test reads need to exist (``real``), the rest are add actions only.

File ``i`` holds ``rows`` rows with ids ``i * rows .. i * rows + rows - 1``, partition ``part = i % parts``;
``x`` (double) spans ``[i, i + 1]`` except every 13th file, whose ``x`` is all NULL, and every 29th, which has
no statistics at all; ``s`` (string) is ``f"s{i:06d}"`` in every row.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("x", "double"), ("s", "string"), ("part", "integer"))
    ],
}


@dataclass(frozen=True)
class LogFile:
    """What the generator wrote for file ``i`` (the brute-force plan's input)."""

    i: int
    path: str
    part: int
    rows: int
    id_range: tuple[int, int]
    x_range: tuple[float, float] | None  # None: every x is NULL
    has_stats: bool


def describe(i: int, rows: int, parts: int, unstated: int = 29) -> LogFile:
    part = i % parts
    return LogFile(
        i=i,
        path=f"part={part}/f-{i:07d}.parquet",
        part=part,
        rows=rows,
        id_range=(i * rows, i * rows + rows - 1),
        x_range=None if i % 13 == 0 else (float(i), float(i) + 1.0),
        has_stats=unstated == 0 or i % unstated != 0,
    )


def data(f: LogFile) -> pa.Table:
    """The rows of file ``f`` (without the partition column)."""
    n = f.rows
    ids = list(range(f.id_range[0], f.id_range[1] + 1))
    if f.x_range is None:
        xs: list[float | None] = [None] * n
    else:
        lo, hi = f.x_range
        xs = [lo + (hi - lo) * k / max(n - 1, 1) for k in range(n)]
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "x": pa.array(xs, pa.float64()), "s": pa.array([f"s{f.i:06d}"] * n)}
    )


def _add(f: LogFile, size: int) -> str:
    add: dict[str, object] = {
        "path": f.path,
        "partitionValues": {"part": str(f.part)},
        "size": size,
        "modificationTime": 1_700_000_000_000,
        "dataChange": True,
    }
    if f.has_stats:
        s = f"s{f.i:06d}"
        mins: dict[str, object] = {"id": f.id_range[0], "s": s}
        maxs: dict[str, object] = {"id": f.id_range[1], "s": s}
        if f.x_range is not None:
            mins["x"], maxs["x"] = f.x_range
        nulls = {"id": 0, "s": 0, "x": f.rows if f.x_range is None else 0}
        add["stats"] = json.dumps({"numRecords": f.rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})
    return json.dumps({"add": add})


def write_table(
    root: str,
    files: int,
    *,
    rows: int = 10,
    parts: int = 97,
    real: Collection[int] | None = (),
    commits: int = 2,
    placeholders: bool = True,
    unstated: int = 29,
    before_adds: Callable[[], None] | None = None,
) -> list[LogFile]:
    """A Delta table at ``root`` naming ``files`` data files in ``commits`` commits, checkpointed at the last.

    ``real``: the files written as Parquet (two row groups each), besides those without statistics (registering
    counts their rows from their footers); None: every one. ``placeholders``: the others as empty files (a
    table registered with files missing is recorded as unavailable). ``unstated``: every how many files one has
    no statistics (0: none). ``before_adds``: called once commit 0 (the table, no files) is written, before the
    commits that add the files (``dal.register`` there, then ``dal.sync``, which does not list the files)."""
    described = [describe(i, rows, parts, unstated) for i in range(files)]
    log = os.path.join(root, "_delta_log")
    os.makedirs(log, exist_ok=True)
    sizes = {}
    for f in described:
        if real is None or f.i in real or not f.has_stats:  # dal counts a file without stats from its footer
            path = os.path.join(root, f.path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pq.write_table(data(f), path, row_group_size=max(1, (rows + 1) // 2))
            sizes[f.i] = os.path.getsize(path)
        elif placeholders:  # registering checks every file the log names is there; planning never opens these
            path = os.path.join(root, f.path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "wb").close()
    header = [
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": str(uuid.uuid4()),
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": ["part"],
                    "configuration": {},
                    "createdTime": 1_700_000_000_000,
                }
            }
        ),
    ]
    first = 0
    if before_adds is not None:  # commit 0: the table alone
        _commit(log, 0, header)
        before_adds()
        header, first = [], 1
    per = -(-files // commits)
    for k in range(commits):
        _commit(log, first + k, header + [_add(f, sizes.get(f.i, 1000)) for f in described[k * per : (k + 1) * per]])
        header = []
    import deltalake

    deltalake.DeltaTable(root).create_checkpoint()
    return described


def _commit(log: str, version: int, actions: list[str]) -> None:
    info = json.dumps({"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}})
    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join([info, *actions]) + "\n")
