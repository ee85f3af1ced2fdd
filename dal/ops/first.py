"""The first rows of a version, reading only the files that hold them: ``dal head`` and the web UI's preview.

A scan plans every file of the version (each file's footer: its row groups) before it reads the first row, so
a 50,000-file table cost 50,000 footers to show 3 rows. Here the version's files are taken in the order a scan
reads them (by path), a few at a time (1, then 2, 4, …: each file is planned once), each group as a scan of a
copy of the ``Dataset`` that holds only those files, with the same columns and filter, until ``n`` rows came:
the same rows, in the same order, as the first ``n`` of the whole scan, and the cost of the files that hold
them (all of them only when a filter matches fewer than ``n`` rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from dal.dataset import Dataset
from dal.formats.base import DataFile
from dal.formats.index import FileIndex
from dal.read.pinned import PlanCache
from dal.scan import Scan

# a row group read whole for a preview: up to 8 of the scan's chunks (reader.CHUNK_BYTES); a larger one goes
# through the scan, which reads a slice of it
PLAIN_GROUP_BYTES = 16 * 1024 * 1024


def first_rows(ds: Dataset, n: int, columns: Sequence[str] | None = None, where: str | None = None) -> pa.Table | None:
    """The first ``n`` rows of ``ds`` (only ``columns``, of the rows ``where`` keeps) as a scan reads them; None
    when there are none (or ``n`` is 0).

    Args:
        ds: The opened version.
        n: How many rows.
        columns: The columns (default: all).
        where: A filter (SQL text), as ``Scan.filter`` takes it.
    """
    if n <= 0:
        return None
    _scan(ds, columns, where)  # columns and filter checked against the whole version before anything is read
    index = ds.file_index()
    listed = sorted(ds.files(), key=lambda f: f.uri) if index is None else []
    total = len(index) if index is not None else len(listed)
    batches: list[pa.RecordBatch] = []
    got, start, step = 0, 0, 1
    while got < n and start < total:
        scan = _scan(_narrowed(ds, index, listed, start, min(total, start + step)), columns, where)
        plain = _plain(scan, n - got) if where is None else None
        for batch in plain if plain is not None else scan.iter_batches(batch_size=n):
            batches.append(batch)
            got += batch.num_rows
            if got >= n:
                break
        start, step = start + step, step * 2
    return pa.Table.from_batches(batches).slice(0, n) if batches else None


def _scan(ds: Dataset, columns: Sequence[str] | None, where: str | None) -> Scan:
    scan = ds.scan()
    if columns:
        scan = scan.select(*columns)
    if where:
        scan = scan.filter(where)
    return scan


def _plain(scan: Scan, n: int) -> list[pa.RecordBatch] | None:
    """The first ``n`` rows of an unfiltered scan's files read file by file (``Query.read_file``: pyarrow.parquet,
    so a preview of a 50,000-file table does not import ``pyarrow.dataset`` and pandas, ~0.3 s of its ~0.8);
    None when a file's count is unknown (its plan is row groups), a row group they need is larger than
    ``PLAIN_GROUP_BYTES``, or the read fails: then the scan reads them (a slice of a large row group), and reports
    the failure as every read does."""
    query = scan.query
    tasks = query.file_tasks()
    if not all(t.whole_file for t in tasks):
        return None
    out: list[pa.RecordBatch] = []
    try:
        for task in tasks:
            tables = query.read_file(task, n, PLAIN_GROUP_BYTES)
            if tables is None:
                return None
            for table in tables:
                out += table.to_batches()
                n -= table.num_rows
            if n <= 0:
                return out
    except Exception:  # the scan's path raises it as every read does (or reads what this could not)
        return None
    return out


def _narrowed(ds: Dataset, index: FileIndex | None, listed: list[DataFile], start: int, end: int) -> Dataset:
    """``ds`` holding only its files ``start .. end - 1`` in reading order (a plan cache of its own)."""
    cache = PlanCache()
    cache.value("schema", ds.arrow_schema)
    if index is not None:
        part = FileIndex(index.location, index.files.slice(start, end - start), index.partition_columns, index.deleted)
        cache.value("index", lambda: part)
    else:
        cache.value("index", lambda: None)
        cache.value("files", lambda: listed[start:end])
    return replace(ds, plan_cache=cache)
