"""The change-read source: ``dal.open(name, v).changes(since=s)`` as one more kind of read source.

``Changes`` is a ``Version`` (``dal.read.source``) whose rows are what versions ``(since, v]`` inserted and
deleted (``dal.read.changes.read_changes``: the format plans, per commit, change-data files, added and removed
files or one multiset difference), each row with ``_change_type``, ``_commit_version`` and
``_commit_timestamp``. It is read as *virtual rows* (the base ``Source`` path samples and mixes take):
the change rows are read once per process, in the calling process — ``plan()`` does it, as every adapter
calls ``plan()`` before it forks DataLoader workers or starts tf.data, so no worker touches delta-rs — and kept
in a box shared by the source's shard/epoch/projection copies (and pickled with it into workers). Filters
and windows apply to them exactly (``dal.expr.to_arrow``, change columns included); ``shard``, ``shuffle``
(chunks permuted and rows inside each, per seed and epoch), epochs, DataLoader workers, resumption
(``identity()`` adds ``since``) and every feed work as for any source.

Decided: the change rows of one call are held in memory (a day's append of a 300-day table reads only that
day's files — ``benchmarks/changes_bench.py``). A change set larger than memory is not this source's case
yet; a planner that reads ``FileChanges`` as row-group tasks (their counts from footers) would stream it.
``to_spark`` hands these rows to Spark from the driver (``dal.spark.read.rows_to_spark``). Terminals that read
files directly (``to_ray``, ``rows``/``take``, ``to_torch_map``, ``sequences``, ``bytes_planned``) refuse a
change read with a ``FilterError`` (``require_files``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from dal import expr as E
from dal.catalog.types import VersionInfo
from dal.errors import FilterError
from dal.expr.walk import conjoin
from dal.formats.changes import CHANGE_FIELDS
from dal.formats.logical import logical_schema, restore, restorers
from dal.read import sampling
from dal.read.changes import read_changes
from dal.read.plan import window_expr
from dal.read.source import Version
from dal.read.tasks import ReadTask

CHUNK = 65_536  # rows of one virtual chunk (a shuffle permutes chunks, and rows inside each)


class _Box:
    """The change rows of one source, read once per process and shared by its copies (pickled with them)."""

    def __init__(self) -> None:
        self.table: pa.Table | None = None
        self._lock = threading.Lock()

    def get(self, compute: Callable[[], pa.Table]) -> pa.Table:
        with self._lock:
            if self.table is None:
                self.table = compute()
            return self.table

    def __getstate__(self) -> dict[str, Any]:
        return {"table": self.table}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.table, self._lock = state["table"], threading.Lock()


def change_schema(stored: pa.Schema) -> pa.Schema:
    """The schema of a change read of a version whose (stored) schema is ``stored``: its columns as written,
    then ``_change_type``, ``_commit_version``, ``_commit_timestamp``."""
    return pa.schema([*logical_schema(stored), *CHANGE_FIELDS])


@dataclass(frozen=True, kw_only=True)
class Changes(Version):
    """The rows versions ``(since, pinned]`` inserted and deleted (see the module docstring)."""

    since: int | None
    versions: tuple[VersionInfo, ...] = field(repr=False, compare=False)
    box: _Box = field(default_factory=_Box, repr=False, compare=False)
    WHAT: ClassVar[str] = "a change read"
    SAME_ROWS_EACH_EPOCH: ClassVar[bool] = True  # the rows versions (since, v] changed, whatever the epoch

    @property
    def arrow_schema(self) -> pa.Schema:
        return change_schema(self.dataset.arrow_schema())

    @property
    def condition(self) -> E.Expr | None:
        terms = list(self.filters)
        if self.window is not None:
            terms.append(window_expr(self.window, self.arrow_schema))
        return conjoin(terms)

    def log_read(self) -> None:
        from dal import lineage

        condition = self.condition
        lineage.record_use(self.dataset.name, self.dataset.number, None if condition is None else E.to_sql(condition))

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "changes_since": self.since}

    def require_files(self, what: str) -> None:
        raise FilterError(
            f"{what} reads a version's files; a change read (changes(since=...)) is read by rows: "
            "to_arrow, iter_batches, to_pandas, to_torch, to_tf, to_numpy, to_polars, to_duckdb or to_spark"
        )

    def bytes_planned(self) -> int:
        self.require_files("bytes_planned")
        return 0

    def _all_rows(self) -> pa.Table:
        """Every change row of the range (all columns, written types), read once per process."""

        def read() -> pa.Table:
            pinned = self.dataset
            table = read_changes(pinned.info, self.versions, self.since, pinned.number, pinned.storage_options)
            return restore(table, restorers(pinned.arrow_schema()))

        return self.box.get(read)

    def rows_table(self) -> pa.Table:
        """The change rows this source returns: filtered (filters, window) and projected."""
        table = self._all_rows()
        condition = self.condition
        if condition is not None:
            table = table.filter(E.to_arrow(condition, table.schema))
        return table.select(self.output_names)

    def materialized(self) -> pa.Table:
        return self.rows_table()

    def plan(self) -> list[ReadTask]:
        """Reads the change rows here, in the calling process (no task: a change read is read by rows)."""
        self._all_rows()
        return []

    def epoch_rows(self) -> ChangeRows:
        return ChangeRows(self.rows_table(), self.permute(), self.chunk_floor())


class ChangeRows(sampling.Rows):
    """A change read's rows numbered 0…N-1: in commit order, or, shuffled, its chunks permuted and the rows
    inside each (a pure function of seed and epoch)."""

    def __init__(self, table: pa.Table, permute: tuple[int, int] | None, floor: int) -> None:
        size = max(CHUNK, floor)
        spans = [(a, min(table.num_rows, a + size)) for a in range(0, table.num_rows, size)]
        if permute is not None and spans:
            order = np.random.default_rng([*permute, 0x43484E47]).permutation(len(spans))
            spans = [spans[i] for i in order]
        self.table, self.spans, self.permute = table, spans, permute
        starts = [0]
        for a, b in spans:
            starts.append(starts[-1] + b - a)
        super().__init__(starts)

    def read_chunk(self, i: int) -> pa.Table:
        a, b = self.spans[i]
        chunk = self.table.slice(a, b - a)
        if self.permute is not None:
            rng = np.random.default_rng([*self.permute, a])
            chunk = chunk.take(pa.array(rng.permutation(chunk.num_rows)))
        return chunk


def changes_source(base: Version, since: int | None, versions: Sequence[VersionInfo]) -> Changes:
    """``base`` (a plain source's projection, filters, window, shard, shuffle, epoch) as a change read."""
    return Changes(
        pinned=base.pinned, columns=base.columns, filters=base.filters, window=base.window, shuffle=base.shuffle,
        shard=base.shard, epoch=base.epoch, stats=base.stats, since=since, versions=tuple(versions),
    )  # fmt: skip
