"""A version's data files as columns — what a table format's log records of each (path, size, rows, partition
values, per-column min / max / NULL counts) — so planning prunes them before making one object per file.

Formats that record per-file statistics (Delta's add actions) hand planning a ``FileIndex``; ``data_files``
then builds ``DataFile`` objects for the files that survive only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.expr.stats import ColumnBounds
from dal.formats.arrays import combinations, int64s, mask, trues, valid
from dal.formats.base import DataFile
from dal.storage import uris


@dataclass(frozen=True, eq=False)
class FileIndex:
    """The files of one pinned version, one row each, in a deterministic order (by path).

    ``files`` holds ``path`` (relative to ``location``, '/'-separated, already confined below it),
    ``size_bytes``, ``num_records`` (NULL: unknown), and per column ``c``: ``partition.c`` for partition
    columns, ``min.c`` / ``max.c`` / ``null_count.c`` where the log records statistics (bounds the format has
    made safe: a truncated bound is widened or NULL). ``deleted``: deletion-vector positions by path.
    ``exact_below``: None when the bounds are only safe; else they are each file's exact min and max for integer,
    floating, date and string columns, save a string bound of this many characters or more (a writer may have
    cut it to a prefix) — what ``exact`` relies on.
    """

    location: str
    files: pa.Table
    partition_columns: tuple[str, ...]
    deleted: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    exact_below: int | None = None

    def __len__(self) -> int:
        return int(self.files.num_rows)

    def _column(self, name: str) -> pa.Array | None:
        if name not in self.files.column_names:
            return None
        return self.files.column(name).combine_chunks()

    def bounds(self, column: str, schema: pa.Schema) -> ColumnBounds | None:
        """``column``'s bounds in every file: its partition value, else its statistics; None when unknown."""
        typ = schema.field(column).type
        rows = self._column("num_records")
        if column in self.partition_columns:
            values = self._column(f"partition.{column}")
            if values is None:
                return None
            try:
                values = values.cast(typ)
            except (pa.ArrowException, ValueError):
                return None
            null = ~valid(values)
            return ColumnBounds(values, values, null, null)
        lo, hi, nulls = (self._column(f"{k}.{column}") for k in ("min", "max", "null_count"))
        try:
            lo = lo.cast(typ) if lo is not None and lo.type != typ else lo
            hi = hi.cast(typ) if hi is not None and hi.type != typ else hi
        except (pa.ArrowException, ValueError):
            lo = hi = None
        if nulls is None:
            some = np.ones(len(self), dtype=bool)
            none_valued = np.zeros(len(self), dtype=bool)
        else:
            counted = valid(nulls)
            some = ~counted | (int64s(nulls) > 0)
            if rows is None:
                none_valued = np.zeros(len(self), dtype=bool)
            else:
                none_valued = counted & valid(rows) & (int64s(nulls) == int64s(rows))
        if lo is None and hi is None and nulls is None:
            return None
        return ColumnBounds(lo, hi, some, none_valued)

    def exact(self, column: str, schema: pa.Schema) -> LoggedColumn | None:
        """What the log states exactly of data column ``column``: the files whose statistics are exact (an
        integer, floating, date or string column; NULL count and row count recorded; no deletion vector; bounds
        recorded, not NaN, strings shorter than ``exact_below``, unless every row is NULL), with their NULLs
        summed and their min and max; None when no file's are."""
        typ = schema.field(column).type
        exact_type = (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_date(typ)
                      or pa.types.is_string(typ) or pa.types.is_large_string(typ))  # fmt: skip
        rows = self._column("num_records")
        lo, hi, nulls = (self._column(f"{k}.{column}") for k in ("min", "max", "null_count"))
        if self.exact_below is None or not exact_type or column in self.partition_columns or rows is None:
            return None
        if lo is None or hi is None or nulls is None:
            return None
        try:
            lo, hi, nulls = lo.cast(typ), hi.cast(typ), nulls.cast(pa.int64())
        except (pa.ArrowException, ValueError):
            return None
        # numpy over the columns' buffers: no Python value converted to Arrow (that imports pandas)
        counts, null_counts = int64s(rows), int64s(nulls)
        counted = valid(nulls) & valid(rows)
        all_null = counted & (null_counts == counts)
        bounded = valid(lo) & valid(hi)
        if pa.types.is_floating(typ):
            bounded &= ~(trues(pc.is_nan(lo)) | trues(pc.is_nan(hi)))
        elif not pa.types.is_integer(typ) and not pa.types.is_date(typ):
            short = (int64s(pc.utf8_length(lo)) < self.exact_below) & (int64s(pc.utf8_length(hi)) < self.exact_below)
            bounded &= short
        covered = counted & (all_null | bounded)
        if self.deleted:
            paths = self.files.column("path").to_pylist()
            covered &= np.array([p not in self.deleted for p in paths], dtype=bool)
        if not covered.any():
            return None
        valued = mask(covered & ~all_null)
        lo_v, hi_v = pc.min(lo.filter(valued)).as_py(), pc.max(hi.filter(valued)).as_py()
        return LoggedColumn(covered, int(null_counts[covered].sum()), lo_v, hi_v)

    def data_files(self, rows: Sequence[int] | np.ndarray | None = None) -> list[DataFile]:
        """The files at ``rows`` (all when None) as ``DataFile`` objects, in index order."""
        uris_, sizes, counts, values, deleted = self.listing(rows)
        return [DataFile(*f) for f in zip(uris_, sizes, counts, values, deleted, strict=True)]

    def listing(
        self, rows: Sequence[int] | np.ndarray | None = None
    ) -> tuple[list[str], list[int], list[int | None], list[tuple[tuple[str, str | None], ...]], list[tuple[int, ...]]]:
        """The files at ``rows`` (all when None), in index order, as columns: URIs, sizes, row counts (None:
        unknown), partition values (as ``DataFile`` spells them: one tuple shared by the files of a partition)
        and deletion-vector positions — what ``data_files`` makes objects of, for callers that need no object
        per file."""
        table = self.files if rows is None else self.files.take(pa.array(np.asarray(rows, dtype=np.int64)))
        paths = table.column("path").to_pylist()
        sizes = table.column("size_bytes").to_pylist()
        counts = table.column("num_records").to_pylist()
        # the root was normalised once (resolved locally); the paths are confined below it: joined as strings
        prefix = uris.join(self.location, "x")[:-1]
        sep = os.sep if uris.is_local(self.location) else "/"
        located = [prefix + rel for rel in paths] if sep == "/" else [prefix + rel.replace("/", sep) for rel in paths]
        names = self.partition_columns
        if names:
            columns = [table.column(f"partition.{c}") for c in names]
            raw = zip(*(col.to_pylist() for col in columns), strict=True)

            def spell(key: tuple[object, ...]) -> tuple[tuple[str, str | None], ...]:
                return tuple((c, None if v is None else _text(v)) for c, v in zip(names, key, strict=True))

            if all(_one_spelling(col.type) for col in columns):  # equal values spell alike: once per partition
                spelled: dict[tuple[object, ...], tuple[tuple[str, str | None], ...]] = {}
                values = [spelled.get(key) or spelled.setdefault(key, spell(key)) for key in raw]
            else:  # 0.0 == -0.0, yet their spellings differ
                values = [spell(key) for key in raw]
        else:
            unpartitioned: tuple[tuple[str, str | None], ...] = ()
            values = [unpartitioned] * len(paths)
        none: tuple[int, ...] = ()
        deleted = [self.deleted.get(rel, none) for rel in paths] if self.deleted else [none] * len(paths)
        return located, sizes, counts, values, deleted

    def columns(self) -> IndexColumns:
        """Every file as columns without a Python value per file where the types allow: what planning without a
        filter keeps of them (``dal.read.tasks.FileTasks``), the URIs and partition values spelled as
        ``listing`` spells them, when a task is made."""
        names = self.partition_columns
        rows = self._column("num_records")
        counts = None
        if rows is not None and rows.null_count == 0:
            counts = int64s(rows)
        prefix = uris.join(self.location, "x")[:-1]
        sep = os.sep if uris.is_local(self.location) else "/"
        n = len(self)
        parts: list[tuple[tuple[str, str | None], ...]] = [()]
        part_of = np.zeros(n, dtype=np.intp)
        if names:
            columns = [self.files.column(f"partition.{c}").combine_chunks() for c in names]
            if all(_one_spelling(col.type) for col in columns):  # equal values spell alike: once per partition
                dicts, keys, part_of = combinations(columns)
                parts = [
                    tuple((c, None if d[k] is None else _text(d[k])) for c, d, k in zip(names, dicts, key, strict=True))
                    for key in keys.T.tolist()
                ]
            else:  # 0.0 == -0.0, yet their spellings differ: as listed
                parts = self.listing()[3]
                part_of = np.arange(n, dtype=np.intp)
        return IndexColumns(self.files.column("path").combine_chunks(), prefix, sep, counts, parts, part_of)


@dataclass(frozen=True, eq=False)
class IndexColumns:
    """``FileIndex.columns``: paths relative to the root ('/'-separated; a URI is ``prefix`` + the path, its
    '/' as ``sep``), row counts (None: some unknown), and partition values, each file's at ``part_of``."""

    paths: pa.Array
    prefix: str
    sep: str
    counts: np.ndarray | None
    parts: list[tuple[tuple[str, str | None], ...]]
    part_of: np.ndarray


@dataclass(frozen=True, eq=False)
class LoggedColumn:
    """One column's exact statistics from the log (``FileIndex.exact``): ``covered`` (one bool per file: its
    statistics are exact), the NULLs of those files summed, and their min and max (None when every row is NULL)."""

    covered: np.ndarray
    nulls: int
    lo: object
    hi: object


def _one_spelling(typ: pa.DataType) -> bool:
    """Whether values of ``typ`` that compare equal are spelled alike by ``_text`` (not floats: 0.0 == -0.0)."""
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)
                or pa.types.is_date(typ) or pa.types.is_boolean(typ))  # fmt: skip


def _text(value: object) -> str:
    """A partition value as the catalog and ``DataFile`` spell it (``str`` of the log's typed value)."""
    return str(value)
