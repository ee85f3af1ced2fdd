"""A commit's plain add actions read as columns: one Arrow JSON read of its add lines and one of their
statistics, instead of a Python object per action (``json.loads`` of each line and of each ``stats``).

``read_adds`` answers only when every add reads exactly as the per-action path (``replay.Tally.applies`` and
``Tally.apply``) would take it: a string path below the table's root (``ownership.below_all``), an integer size,
statistics that are a JSON object whose ``numRecords`` is absent or a non-negative integer within what a file
of that size can hold, string partition values named as the table's partition keys. Anything else (a line the
reader types otherwise, a duplicate key, a blank or multi-line ``stats``, a value of another JSON type, an
extra key, ...) makes it answer None, and the commit takes the per-action path, which decides as before: the
same result or the same error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import FormatError
from dal.formats.arrays import from_int64s, int64s, trues, valid, with_nulls
from dal.formats.footers import PAGE_BYTES, PAGE_VALUES
from dal.storage import ownership

# fewer plain adds than this in a commit: one object per action is as cheap (each Arrow read and compute call has
# a fixed cost: ~0.45 ms for 50 adds against ~0.4 ms per action; 500 adds: ~1.6 ms against ~4 ms)
COLUMNS_FROM = 100
_ADD = b'{"add":'
_DV = b'"deletionVector"'

# one "\n" as an Arrow string array (a Python "\n" given to ``binary_join`` would be converted: pandas imported)
_NEWLINE = pa.Array.from_buffers(
    pa.string(), 1, [None, pa.py_buffer(np.array([0, 1], dtype=np.int32)), pa.py_buffer(b"\n")]
)


@dataclass(frozen=True)
class Adds:
    """A commit's add actions, in log order: the lines, each path as written and below the root, its size, its
    ``numRecords`` (True: none, counted from the footer) and its partition values (text, in the keys' order)."""

    lines: Sequence[bytes]
    raw: list[str]
    paths: list[str]
    sizes: list[int]
    counts: list[int | bool]
    values: list[tuple[str | None, ...]]
    stats: list[bool]  # whether the add has statistics (text)
    uncounted: bool = False  # whether an add has no numRecords (True in ``counts``)
    rewrites: bool = False  # whether an add says ``dataChange: false`` (a file re-added, not a new one)
    null_values: bool = False  # whether a partition value is NULL (or its key missing: alike in the columns)


def split(lines: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
    """A commit's lines: the plain add actions (``{"add":`` first, no deletion vector named), and the others."""
    plain = [line for line in lines if line.startswith(_ADD)]
    if _DV not in b"".join(plain):  # one scan of the commit's adds, not one per line
        return plain, [] if len(plain) == len(lines) else [line for line in lines if not line.startswith(_ADD)]
    plain = [line for line in plain if _DV not in line]
    return plain, [line for line in lines if not line.startswith(_ADD) or _DV in line]


def _read(data: bytes | pa.Buffer, schema: pa.Schema, unexpected: str) -> pa.Table | None:
    import pyarrow.json as pj

    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unexpected)
    try:  # one thread: a commit is small, and a reader thread pool costs more than it saves
        return pj.read_json(
            pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False), parse_options=options
        )
    except (pa.ArrowException, ValueError):  # not what the per-action path reads alike: it decides
        return None


def read_adds(lines: Sequence[bytes], keys: Sequence[str], location: str, where: str) -> Adds | None:
    """The add actions of ``lines`` (each ``{"add": {...}}``, from ``split``) as columns, or None when one is not
    plainly what the per-action path would apply (see the module's docstring). ``keys``: the partition values'
    keys (physical names under column mapping)."""
    keys = list(dict.fromkeys(keys))
    part = pa.struct([(k, pa.string()) for k in keys])
    add = pa.struct([("path", pa.string()), ("size", pa.int64()), ("stats", pa.string()), ("partitionValues", part),
                     ("dataChange", pa.bool_())])  # fmt: skip
    table = _read(b"\n".join(lines), pa.schema([("add", add)]), "infer")
    if table is None or table.num_rows != len(lines) or table.column_names != ["add"]:
        return None
    col = table.column("add").combine_chunks()
    if col.null_count:
        return None
    assert isinstance(col, pa.StructArray)
    raw, size, stats, values = (col.field(n) for n in ("path", "size", "stats", "partitionValues"))
    assert isinstance(values, pa.StructArray)
    if raw.null_count or size.null_count or values.null_count or values.type.num_fields != len(keys):
        return None
    counts = _counts(stats)
    if counts is None:
        return None
    try:
        paths = ownership.below_all(location, raw, table=where, entry="an add action's path")
    except FormatError:
        return None  # the per-action path says which
    if _implausible(counts, size):
        return None  # the per-action path refuses it, after its other checks
    texts = [values.field(k).to_pylist() for k in keys]
    changes = col.field("dataChange")
    return Adds(
        lines=lines,
        raw=raw.to_pylist(),
        paths=paths.to_pylist(),
        sizes=size.to_pylist(),
        counts=[True if n is None else n for n in counts.to_pylist()] if counts.null_count else counts.to_pylist(),
        uncounted=bool(counts.null_count),
        values=list(zip(*texts, strict=True)) if keys else [()] * len(lines),
        stats=pc.is_valid(stats).to_pylist(),
        rewrites=bool(trues(pc.invert(changes)).any()),
        null_values=any(None in t for t in texts),
    )


def _implausible(counts: pa.Array, sizes: pa.Array) -> bool:
    """Whether a count exceeds what a file of its size can hold (``footers.most_rows``: ``n > q * PAGE_VALUES``
    with ``q = max(size, 0) // PAGE_BYTES``, in int64 without overflow)."""
    n = int64s(counts)
    q = np.maximum(int64s(sizes), 0) // PAGE_BYTES
    whole, part = np.divmod(n, PAGE_VALUES)
    return bool(np.any((whole > q) | ((whole == q) & (part > 0))))


def _counts(stats: pa.Array) -> pa.Array | None:
    """Each add's ``numRecords`` (null: no statistics or no count), None when one is not plainly readable.
    (No Python value is converted to Arrow here: that would import pandas, ``dal.formats.arrays``.)"""
    present = stats.drop_null()
    if not len(present):
        return pa.nulls(len(stats), pa.int64())
    one = pa.ListArray.from_arrays(from_int64s([0, len(present)], pa.int32()), present)
    joined = pc.binary_join(one, _NEWLINE)
    # one object per line: a blank or multi-line text would shift the rows (the regex only when the joined
    # texts hold a line break of their own: a blank one alone drops a row, which the count below refuses)
    text = joined[0].as_buffer().to_pybytes()
    if text.count(b"\n") != len(present) - 1 or b"\r" in text:
        if pc.any(pc.match_substring_regex(present, r"^\s*$|[\r\n]")).as_py():
            return None
    parsed = _read(text, pa.schema([("numRecords", pa.int64())]), "ignore")
    if parsed is None or parsed.num_rows != len(present):
        return None
    found = parsed.column("numRecords").combine_chunks()
    known = valid(found)
    numbers = int64s(found)
    if bool(np.any(numbers[known] < 0)):
        return None
    if not stats.null_count:
        return found
    # back to one per add: the statistics' counts where they are, null (no count) where none
    has = valid(stats)
    where = np.maximum(np.cumsum(has) - 1, 0)
    return with_nulls(from_int64s(numbers[where]), has & known[where])
