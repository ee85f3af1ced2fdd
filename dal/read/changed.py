"""The change-read source: ``dal.open(name, v).changes(since=s)`` as one more kind of read source.

``Changes`` is a ``Version`` (``dal.read.source``) whose rows are what versions ``(since, v]`` inserted and
deleted (``dal.read.changes.plan_changes``: the format plans, per commit, change-data files, added and removed
files or one multiset difference), each row with ``_change_type``, ``_commit_version`` and
``_commit_timestamp``. It is read as *virtual rows* (the base ``Source`` path samples and mixes take), numbered
0…N-1 over *pieces* (``dal.read.changes.pieces``): a row group of a file whose rows are all inserts, all
deletes or change data, or one commit's rewrite (a ``DiffUnit``, whose changes are known only once both sides
are read). The plan and each piece's row count (from the footers; with a filter or window, or for a
``DiffUnit``, each piece read once and counted, then dropped) are made once per process, in the calling
process — ``plan()`` does it, as every adapter calls ``plan()`` before it forks DataLoader workers or starts
tf.data — and kept in a box shared by the source's copies (and pickled with it into workers: numbers, no
rows). Rows are then read piece by piece as ``ChangeRows`` chunks, a few kept (``sampling.Rows``): a change set
larger than memory streams through ``iter_batches`` / ``to_torch`` holding a few pieces
(``tests/changes/test_streaming_changes.py``). Filters and windows apply exactly (``dal.expr.to_arrow``, change
columns included); ``shard``, ``shuffle`` (chunks permuted and rows inside each, per seed and epoch; a chunk is
one piece, or consecutive pieces up to the shuffle buffer), epochs, DataLoader workers (fork, spawn,
forkserver), resumption (``identity()`` adds ``since``) and every feed work as for any source.

Held whole: one ``DiffUnit`` piece (one commit's removed and added files, diffed in memory), and
``materialized()`` / ``rows_table()`` (the null check of ``to_numpy``'s tensor columns, ``to_spark``'s rows).
``to_spark`` hands the rows to Spark from the driver (``dal.spark.read.rows_to_spark``). Terminals that read
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
from dal.errors import ChangesUnavailable, FilterError
from dal.expr.walk import conjoin
from dal.formats.changes import CHANGE_FIELDS, ChangePlan
from dal.formats.logical import logical_schema, restore, restorers
from dal.read import sampling
from dal.read.changes import pieces, plan_changes, read_piece
from dal.read.plan import window_expr
from dal.read.source import Version
from dal.read.tasks import ReadTask


class _Box:
    """What one source computed once per process — the change plan cut into pieces, and per condition how many
    rows of each piece it keeps — shared by the source's copies and pickled with them (small: no rows)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._lock = threading.RLock()  # a count computes the plan under it: the same thread takes it again

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self.values:
                self.values[key] = compute()
            return self.values[key]

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"values": dict(self.values)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.values, self._lock = state["values"], threading.RLock()


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

    def _plan(self) -> tuple[ChangePlan, list[tuple[int, int, int]]]:
        """The change plan and its pieces (``dal.read.changes.pieces``), planned once per process: footers
        only, no row read."""

        def compute() -> tuple[ChangePlan, list[tuple[int, int, int]]]:
            pinned = self.dataset
            plan = plan_changes(pinned.info, self.versions, self.since, pinned.number, pinned.storage_options)
            return plan, pieces(plan, pinned.storage_options)

        plan: tuple[ChangePlan, list[tuple[int, int, int]]] = self.box.get("plan", compute)
        return plan

    def piece_rows(self, piece: tuple[int, int, int]) -> pa.Table:
        """The change rows of one piece: written types, filtered (filters, window), every column."""
        plan, _cut = self._plan()
        pinned = self.dataset
        table = read_piece(plan, piece[0], piece[1], pinned.storage_options)
        table = restore(table, restorers(pinned.arrow_schema()))
        condition = self.condition
        return table if condition is None else table.filter(E.to_arrow(condition, table.schema))

    def counts(self) -> list[int]:
        """How many rows of each piece this source's condition keeps: from the footers where nothing can drop
        rows, else each piece read (one at a time, then dropped) and counted; once per process and condition."""
        condition = self.condition
        key = "counts " + ("" if condition is None else E.to_sql(condition))

        def compute() -> list[int]:
            _plan, cut = self._plan()
            return [p[2] if condition is None and p[2] >= 0 else self.piece_rows(p).num_rows for p in cut]

        counts: list[int] = self.box.get(key, compute)
        return counts

    def rows_table(self) -> pa.Table:
        """Every change row this source returns, in commit order (filtered, projected), read whole."""
        _plan, cut = self._plan()
        tables = [self.piece_rows(p).select(self.output_names) for p in cut]
        schema = self.arrow_schema
        empty = pa.schema([schema.field(n) for n in self.output_names]).empty_table()
        return pa.concat_tables(tables) if tables else empty

    def materialized(self) -> pa.Table:
        return self.rows_table()

    def plan(self) -> list[ReadTask]:
        """Plans the change read and counts its pieces here, in the calling process (no task: a change read is
        read by rows; workers get the plan and the counts, pickled with the source, and read their pieces)."""
        self.counts()
        return []

    def epoch_rows(self) -> ChangeRows:
        return ChangeRows(self, self.permute(), self.chunk_floor())


class ChangeRows(sampling.Rows):
    """A change read's rows numbered 0…N-1, read lazily piece by piece (``Rows`` keeps a few chunks): a chunk
    is one piece (a row group of a file of inserts, deletes or change data; one commit's rewrite), or
    consecutive pieces up to the shuffle buffer's floor. In commit order, or, shuffled, the chunks permuted and
    the rows inside each (a pure function of seed and epoch)."""

    def __init__(self, source: Changes, permute: tuple[int, int] | None, floor: int) -> None:
        _plan, cut = source._plan()
        groups: list[list[tuple[int, int, int]]] = []
        sizes: list[int] = []
        for piece, n in zip(cut, source.counts(), strict=True):
            if not n:
                continue
            if groups and sizes[-1] < floor:
                groups[-1].append(piece)
                sizes[-1] += n
            else:
                groups.append([piece])
                sizes.append(n)
        order = list(range(len(groups)))
        if permute is not None and groups:
            order = [int(i) for i in np.random.default_rng([*permute, 0x43484E47]).permutation(len(groups))]
        self.source, self.permute = source, permute
        self.groups = [groups[i] for i in order]
        self.sizes = [sizes[i] for i in order]
        self.seeds = order  # a chunk's rows are permuted by its place in commit order
        starts = [0]
        for n in self.sizes:
            starts.append(starts[-1] + n)
        super().__init__(starts)

    def read_chunk(self, i: int) -> pa.Table:
        source = self.source
        chunk = pa.concat_tables([source.piece_rows(p) for p in self.groups[i]]).select(source.output_names)
        if chunk.num_rows != self.sizes[i]:
            raise ChangesUnavailable(
                f"{source.dataset.name}: a file of the change read changed while it was read "
                f"({chunk.num_rows} rows, {self.sizes[i]} counted)"
            )
        if self.permute is not None:
            rng = np.random.default_rng([*self.permute, self.seeds[i]])
            chunk = chunk.take(pa.array(rng.permutation(chunk.num_rows)))
        return chunk


def changes_source(base: Version, since: int | None, versions: Sequence[VersionInfo]) -> Changes:
    """``base`` (a plain source's projection, filters, window, shard, shuffle, epoch) as a change read."""
    return Changes(
        pinned=base.pinned, columns=base.columns, filters=base.filters, window=base.window, shuffle=base.shuffle,
        shard=base.shard, epoch=base.epoch, stats=base.stats, since=since, versions=tuple(versions),
    )  # fmt: skip
