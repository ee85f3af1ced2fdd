"""Delta per-file statistics (``add.stats``) computed from Arrow data, as the Delta protocol lays them out.

PROTOCOL.md "Per-file Statistics": ``minValues``/``maxValues``/``nullCount`` mirror the schema of the data
file, so a struct column's statistics are nested objects, never a number. As delta-kernel (which delta-rs
decodes them with) and delta-spark expect:

- arrays, maps (and everything inside them) have no statistics at all;
- ``nullCount`` holds every other leaf, a nested leaf counting the rows where it or any parent is null;
- ``minValues``/``maxValues`` hold only types with a skipping order: integers, floats, strings, dates,
  timestamps (not booleans, binary, decimals: decimals would have to pass through a float, which can round a
  bound the wrong way);
- only the first 32 leaves (``delta.dataSkippingNumIndexedCols``' default) are described.

Bounds are conservative: a NaN or infinite float bound, or a string max longer than 32 characters, is left
out rather than written inexactly; timestamp bounds are widened to whole milliseconds (Delta's precision).
Runs on Spark executors: pure pyarrow, no Spark or delta-rs imports.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

INDEXED_LEAVES = 32
STRING_PREFIX = 32
Path = tuple[str, ...]


def _has_order(t: pa.DataType) -> bool:
    return bool(
        (pa.types.is_integer(t))
        or (pa.types.is_floating(t) and not pa.types.is_float16(t))
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
    )


def _no_stats(t: pa.DataType) -> bool:
    """Arrays and maps: no statistics at all (and they do not count against the indexed leaves)."""
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
        or pa.types.is_map(t)
    )


def leaves(schema: pa.Schema, limit: int = INDEXED_LEAVES) -> list[tuple[Path, pa.DataType]]:
    """The leaf columns that get statistics, depth first in schema order, at most ``limit``."""
    out: list[tuple[Path, pa.DataType]] = []

    def walk(path: Path, t: pa.DataType) -> None:
        if _no_stats(t):
            return
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk((*path, t.field(i).name), t.field(i).type)
        elif len(out) < limit:
            out.append((path, t))

    for f in schema:
        walk((f.name,), f.type)
    return out


def _column(table: pa.Table, path: Path) -> pa.ChunkedArray:
    """The leaf at ``path``, null wherever it or one of its parent structs is null."""
    col = table.column(path[0])
    for name in path[1:]:
        t = col.type
        col = col.flatten()[t.get_field_index(name)]  # flatten() merges the parent's validity into the child
    return col


def _bound(v: Any, *, upper: bool) -> Any:
    """A JSON bound for ``v`` that is <= (or >= with ``upper``) it, or None when none can be written exactly."""
    if isinstance(v, datetime):
        micro = v.microsecond % 1000  # Delta keeps milliseconds: widen the bound to the next whole one
        if micro:
            v = v.replace(microsecond=v.microsecond - micro)
            if upper:
                try:
                    v = v + timedelta(milliseconds=1)
                except OverflowError:
                    return None
        text = v.replace(tzinfo=None).isoformat(timespec="milliseconds")
        return text + "Z" if v.tzinfo is not None else text
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, str) and len(v) > STRING_PREFIX:
        return None if upper else v[:STRING_PREFIX]  # a prefix is <= the string; no short upper bound is exact
    return v


@dataclass
class FileStats:
    """Statistics of one data file, accumulated batch by batch."""

    schema: pa.Schema
    rows: int = 0
    nulls: dict[Path, int] = field(default_factory=dict)
    mins: dict[Path, Any] = field(default_factory=dict)
    maxs: dict[Path, Any] = field(default_factory=dict)
    no_min: set[Path] = field(default_factory=set)  # a value with no exact JSON bound was seen
    no_max: set[Path] = field(default_factory=set)  # (NaN: Spark orders it above every number; overflow)

    def add(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        for path, t in leaves(self.schema):
            col = _column(table, path)
            self.nulls[path] = self.nulls.get(path, 0) + col.null_count
            if not _has_order(t) or col.null_count == len(col) or path in self.no_min:
                continue
            if pa.types.is_floating(t) and pc.any(pc.is_nan(col)).as_py():
                self.no_max.add(path)  # min_max skips NaN, which Spark orders above every number
            try:
                mm = pc.min_max(col)
                lo, hi = mm["min"].as_py(), mm["max"].as_py()
            except (ValueError, OverflowError, pa.ArrowException):  # e.g. dates beyond Python's range
                self.no_min.add(path)
                self.no_max.add(path)
                continue
            if lo is None or hi is None:
                continue
            self.mins[path] = lo if path not in self.mins else min(self.mins[path], lo)
            self.maxs[path] = hi if path not in self.maxs else max(self.maxs[path], hi)

    def to_dict(self) -> dict[str, Any]:
        def nest(values: dict[Path, Any], *, upper: bool | None) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for path, v in values.items():
                if path in (self.no_max if upper else self.no_min if upper is False else ()):
                    continue
                value = v if upper is None else _bound(v, upper=upper)
                if value is None:
                    continue
                node = out
                for name in path[:-1]:
                    node = node.setdefault(name, {})
                node[path[-1]] = value
            return out

        return {
            "numRecords": self.rows,
            "minValues": nest(self.mins, upper=False),
            "maxValues": nest(self.maxs, upper=True),
            "nullCount": nest(self.nulls, upper=None),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)


def prunable_bounds(
    actions: pa.Table, schema: pa.Schema, partition_columns: tuple[str, ...], *, with_stats: bool = True
) -> pa.Table:
    """The columns of delta-rs's flattened add actions planning uses (``dal.formats.index.FileIndex``), with
    every bound made safe to prune by, whichever writer wrote it: timestamps widened by a millisecond each
    way (Delta keeps milliseconds, truncated), a string max of ``STRING_PREFIX`` characters or more dropped
    (writers truncate it), and no bounds for decimals and booleans (a writer may have passed them through a
    float), nested or dotted names (``min.a.b`` would be ambiguous), or any column when ``with_stats`` is
    False (column mapping: the log names physical columns)."""
    keep = ["path", "size_bytes", "num_records", *(f"partition.{c}" for c in partition_columns)]
    out = actions.select([c for c in keep if c in actions.column_names])
    if not with_stats:
        return out
    for f in schema:
        names = [f"min.{f.name}", f"max.{f.name}", f"null_count.{f.name}"]
        if not _prunable(f, partition_columns) or not all(n in actions.column_names for n in names):
            continue
        lo, hi, nulls = (actions.column(n) for n in names)
        lo, hi = _safe(lo, hi)
        out = out.append_column(names[0], lo).append_column(names[1], hi).append_column(names[2], nulls)
    return out


def _prunable(f: pa.Field, partition_columns: tuple[str, ...]) -> bool:
    """Whether the log's bounds of ``f`` may prune: a top-level data column of an integer, floating, string,
    date or timestamp type."""
    t = f.type
    usable = (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )
    return usable and f.name not in partition_columns and "." not in f.name


def _safe(lo: pa.ChunkedArray, hi: pa.ChunkedArray) -> tuple[pa.ChunkedArray | pa.Array, pa.ChunkedArray | pa.Array]:
    """Timestamps widened by a millisecond each way; a string max of ``STRING_PREFIX`` characters or more
    dropped (a writer may have truncated it)."""
    if pa.types.is_timestamp(lo.type) and pa.types.is_timestamp(hi.type):
        return _widened(lo, -1), _widened(hi, 1)
    if pa.types.is_string(hi.type) or pa.types.is_large_string(hi.type):
        # no scalar made from Python (pyarrow would import pandas, ~0.25 s CPU of a first plan): a regex
        long = pc.match_substring_regex(hi, f"(?s)^.{{{STRING_PREFIX}}}")  # STRING_PREFIX characters or more
        return lo, pc.if_else(long, pa.nulls(len(hi), hi.type), hi)
    return lo, hi


def _widened(bound: pa.ChunkedArray, direction: int) -> pa.ChunkedArray | pa.Array:
    """A timestamp bound moved one millisecond outwards (NULL where that would overflow)."""
    step = pa.scalar(timedelta(milliseconds=direction), pa.duration(bound.type.unit))
    try:
        return pc.add_checked(bound, step)
    except pa.ArrowInvalid:
        return pa.nulls(len(bound), bound.type)
