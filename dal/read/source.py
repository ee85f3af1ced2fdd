"""Read sources: the frozen value a ``Scan`` (or a ``Mix``) hands the read engine, one class per kind of scan.

``dal.read``, ``dal.adapters`` and ``dal.spark.read`` read a ``Source``; they never see ``dal.scan`` (an
import-linter contract forbids it, type-checking imports included). ``Scan`` keeps the builder methods
(``select``, ``filter``, ``shard``, ``sample``, …): once narrowed, its terminals build the source once
(``Scan._source``) and pass it down. As pyiceberg's ``DataScan.plan_files`` / ``ArrowScan``: the reader gets
plain values, and each kind of scan is a subclass with its own planning instead of a mode flag.

The design::

    Source                      abstract: what every reader needs (frozen, picklable, small)
      shard, epoch              (rank, world size, remainder) or None; the epoch
      dataset, arrow_schema, output_names, query, condition
      with_shard / with_epoch   variants (the feed's rank and epoch)
      members()                 the one-version sources it reads (itself; a mix: its members)
      plan / split / task_rows / chunk_spans     the plan as ReadTasks (a plain scan's; virtual: refused)
      file_plan                 the plan before any file is opened (a plain scan without filter or shuffle:
                                one task per file, the log's counts; ``Query.expand`` gives its row groups)
      iter_chunks / count       this rank's rows as chunks / counted
      epoch_rows()              the whole epoch numbered 0…N-1 (``dal.read.sampling.Rows``)
      numbered()                the whole epoch as a canonical-shard order reads it
      rank_stream / rank_rows / worker_chunks    a rank's (or a DataLoader worker's) units and rows
      identity()                what a resumption state records of it (JSON)
      log_read()                the read log and lineage (``dal.lineage``)
    Version(Source)             one pinned version: dataset, columns, filters, window, shuffle, stats
      RowGroups(Version)        a plain scan: its plan's row groups, streamed (``reader.read_chunks``)
      Picked(Version)           sample / balance: the picked rows of a per-epoch ``selection``
    Mixed(Source)               a mix (``dal.read.mixed``): members interleaved in blocks

Picked and Mixed are *virtual*: read by row ranges of ``epoch_rows()``; the base class's methods are that
path, and ``RowGroups`` overrides them with the streaming one. The feed (``dal.read.feed``) and the adapters
call the methods and never ask which kind they hold.

A change-read (rows inserted / deleted between two versions, each with ``_change_type``,
``_commit_version``, ``_commit_timestamp``) is one more ``Version`` subclass: its ``plan`` lists the change
files' tasks (a ReadTask per row group of a change file, carrying its constant columns as partition values,
which the reader already appends as columns), ``identity`` adds the version range, and everything above
(shard, shuffle, epoch, DataLoader workers, resumption, to_torch) works unchanged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from dal import expr as E
from dal.errors import DalError, FilterError, check_int, translating
from dal.read import reader, sampling
from dal.read.pinned import Pinned, translate_missing
from dal.read.plan import Query, Window, cut, total
from dal.read.sharding import Remainder, share
from dal.read.stats import Recorder, StatsBox
from dal.read.tasks import ReadTask

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
Shard = tuple[int, int, Remainder]
Unit = Callable[[], pa.Table]  # reads one unit's rows (on a reader thread)


class Stream:
    """One rank's epoch as units to read in order; each unit's table holds whole batches except the last.

    ``units`` are callables (picklable closures are not needed: workers rebuild the stream)."""

    def __init__(self, units: list[Unit], rows: int, batch_size: int) -> None:
        self.units, self.rows, self.batch_size = units, rows, batch_size


def rows_unit(rows_reader: Any, ranges: list[tuple[int, int]], order: np.ndarray | None = None) -> Unit:
    """A unit reading ``ranges`` of ``rows_reader`` (a ``Rows`` or a ``reader.RowReader``), gathered by ``order``."""

    def unit() -> pa.Table:
        pieces = [p for a, b in ranges for p in rows_reader.rows(a, b)]
        table = pa.concat_tables(pieces).combine_chunks() if pieces else None
        if table is None:
            raise DalError("internal: an empty unit")
        return table.take(pa.array(order)) if order is not None else table

    return unit


@dataclass(frozen=True, kw_only=True)
class Source:
    """What the read engine reads (see the module docstring). The base class reads virtual rows."""

    shard: Shard | None = None
    epoch: int = 0
    WHAT: ClassVar[str] = "a source"  # how errors name this kind
    # every epoch has the same rows (reordered at most): a count is every epoch's (to_tf's cardinality).
    # Not so for a sample (its count varies around fraction·N), a balance or a mix unless proven
    SAME_ROWS_EACH_EPOCH: ClassVar[bool] = False

    # -- what every reader sees -------------------------------------------------------------------

    @property
    def dataset(self) -> Pinned:
        """The pinned version read (a mix: its first member's, whose schema the others share)."""
        raise NotImplementedError

    @property
    def arrow_schema(self) -> pa.Schema:
        raise NotImplementedError

    @property
    def output_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def query(self) -> Query:
        raise NotImplementedError

    @property
    def condition(self) -> E.Expr | None:
        return self.query.condition

    def members(self) -> tuple[Version, ...]:
        """The one-version sources this source reads (itself; a mix: its members)."""
        raise NotImplementedError

    def with_shard(self, shard: Shard | None) -> Self:
        return replace(self, shard=shard)

    def with_epoch(self, epoch: int) -> Self:
        return replace(self, epoch=epoch)

    def log_read(self) -> None:
        for member in self.members():
            member.log_read()

    def require_files(self, what: str) -> None:
        """Nothing, for a source of files (a change read refuses: ``what`` reads files, not rows)."""

    def materialized(self) -> pa.Table | None:
        """The rows, when this source holds them in memory (a change read); None for a source of files."""
        return None

    def identity(self) -> dict[str, Any]:
        """What a resumption state records of this source, JSON-normalised: resuming checks it unchanged."""
        raise NotImplementedError

    # -- the plan (a plain scan's) -----------------------------------------------------------------

    def plan(self) -> list[ReadTask]:
        """The ReadTasks this rank reads this epoch (planning, footers and file lists, done in this process)."""
        raise NotImplementedError

    def file_plan(self) -> Sequence[ReadTask]:
        """``plan()`` before any file is opened where the kind of source can (a plain scan's file tasks)."""
        return self.plan()

    def split(self, index: int, parts: int) -> list[ReadTask]:
        _check_split(index, parts)
        raise FilterError(f"{self.WHAT} splits by rows, not by tasks: to_torch's DataLoader workers split it")

    def task_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        with translate_missing(self.dataset):
            return self.query.task_rows(tasks)

    def chunk_spans(self, tasks: Sequence[ReadTask]) -> list[tuple[int, int]]:
        raise FilterError(f"{self.WHAT} is read by rows (iter_chunks / to_torch), not by tasks")

    # -- rows ----------------------------------------------------------------------------------------

    def epoch_rows(self) -> sampling.Rows:
        """The whole epoch (every rank's rows) numbered 0…N-1."""
        raise NotImplementedError

    def numbered(self) -> Any:
        """The whole epoch as a canonical-shard order reads it (``total``, ``rows(a, b)``)."""
        return replace(self, shard=None).epoch_rows()

    def iter_chunks(
        self,
        tasks: Sequence[ReadTask] | None = None,
        *,
        skip_rows: int = 0,
        convert: Callable[[pa.Table], T] | None = None,
    ) -> Iterator[Any]:
        """This rank's rows as chunks, the first ``skip_rows`` dropped, each ``convert``-ed on a reader thread."""
        if tasks is not None:
            raise FilterError(f"{self.WHAT} is read whole (its rank's share), not by tasks")
        skip_rows = check_int(skip_rows, "skip_rows", minimum=0)
        units, _n = sampling.rank_units(self.epoch_rows(), self.shard, skip_rows)
        yield from sampling.read_units(units, convert)

    def count(self) -> int:
        """Rows of one epoch of this rank."""
        return sampling.length(sampling.rank_ranges(self.epoch_rows().total, self.shard))

    def rank_stream(self, skip: int) -> Stream:
        """The rank's stream without canonical shards, its first ``skip`` rows dropped."""
        units, rows = sampling.rank_units(self.epoch_rows(), self.shard, skip)
        return Stream(units, rows, 0)

    def rank_rows(self, worker: int | None = None, workers: int | None = None) -> int:
        """Rows of the rank's epoch (of worker ``worker`` of ``workers`` when given), counted, not read."""
        ranges = sampling.rank_ranges(self.epoch_rows().total, self.shard)
        if workers is not None and worker is not None:
            ranges = sampling.part_ranges(ranges, worker, workers)
        return sampling.length(ranges)

    def worker_chunks(
        self, worker: int, workers: int, convert: Callable[[pa.Table], T], skip: int = 0
    ) -> Iterator[Any]:
        """A plain DataLoader worker's disjoint share of the rank's rows, converted, its first ``skip`` dropped."""
        rows = self.epoch_rows()
        ranges = sampling.part_ranges(sampling.rank_ranges(rows.total, self.shard), worker, workers)
        return sampling.read_units(sampling.units(rows, sampling.sub_ranges(ranges, skip)), convert)


def _check_split(index: int, parts: int) -> tuple[int, int]:
    parts, index = check_int(parts, "parts"), check_int(index, "index")  # NumPy integers too, no bool
    if parts < 1:
        raise FilterError(f"parts must be a positive int, got {parts!r}")
    if not 0 <= index < parts:
        raise FilterError(f"index must be in [0, {parts}), got {index!r}")
    return index, parts


@dataclass(frozen=True, kw_only=True)
class Version(Source):
    """A source over one pinned version: its projection, filters, window and shuffle; ``stats`` collects the
    reads made through it (shared with the Scan it came from, and its epochs)."""

    pinned: Pinned
    columns: tuple[str, ...] | None = None
    filters: tuple[E.Expr, ...] = ()
    window: Window | None = None
    shuffle: tuple[int, int] | None = None  # (seed, rows a shuffled chunk holds at least)
    stats: StatsBox = field(default_factory=StatsBox, compare=False, repr=False)

    @property
    def dataset(self) -> Pinned:
        return self.pinned

    @cached_property
    def query(self) -> Query:  # type: ignore[override]
        """What planning and reading see (filters, window, projection)."""
        return Query(self.pinned, self.columns, self.filters, self.window)

    @property
    def arrow_schema(self) -> pa.Schema:
        from dal.formats.logical import logical_schema

        return logical_schema(self.dataset.arrow_schema())

    @property
    def output_names(self) -> list[str]:
        return list(self.columns) if self.columns is not None else list(self.arrow_schema.names)

    @property
    def row_filter(self) -> pc.Expression | None:
        return self.query.row_filter

    def members(self) -> tuple[Version, ...]:
        return (self,)

    def with_columns(self, names: Sequence[str]) -> Self:
        """The source narrowed to ``names`` (of its own columns): its reads counted apart."""
        if not names:
            raise FilterError("select needs at least one column; count() counts the rows without reading any")
        return replace(self, columns=tuple(names), stats=StatsBox())

    def permute(self) -> tuple[int, int] | None:
        return (self.shuffle[0], self.epoch) if self.shuffle is not None else None

    def chunk_floor(self) -> int:
        return self.shuffle[1] if self.shuffle is not None else 0

    def log_read(self) -> None:
        """Record a read: in the process's read log (``dal.read_log``) when filtered (or windowed), once per
        dataset, version and filter text (``dal.open`` recorded the unfiltered one), and as a read the next
        write infers as its input (``dal.lineage``)."""
        from dal import lineage

        condition = self.query.condition
        name, number = self.dataset.name, self.dataset.number
        text = None if condition is None else E.to_sql(condition)
        if text is not None and not any(
            (r.dataset, r.version, r.filters) == (name, number, text) for r in lineage.read_log()
        ):
            lineage.record_read(name, number, text)
        else:
            lineage.record_use(name, number, text)

    def record(self, recorder: Recorder) -> None:
        """One pass done (or abandoned): its statistics added to this source's, the Dataset's and the read log's.
        Nothing while the interpreter shuts down (an iterator left open at exit): no import works then, and
        no one is left to read them."""
        if sys.is_finalizing():
            return
        from dal import lineage

        stats = recorder.finish()
        self.stats.add(stats)
        box = getattr(self.dataset, "stats_", None)
        if isinstance(box, StatsBox):
            box.add(stats)
        condition = self.query.condition
        lineage.add_stats(stats.dataset, stats.version, None if condition is None else E.to_sql(condition), stats)

    def described(self) -> Any:
        """The selection as a state records it (None: every row)."""
        return None

    def rows_of(self) -> dict[str, Any]:
        """What decides the rows and their order besides dataset, version and seed: the filters and window (as
        SQL), the columns (they size the chunks, inside which a shuffle permutes rows), the shuffle's buffer."""
        condition = self.condition
        return {
            "where": E.to_sql(condition) if condition is not None else None,
            "columns": list(self.columns) if self.columns is not None else None,
            "buffer": self.shuffle[1] if self.shuffle is not None else None,
        }

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def bytes_planned(self) -> int:
        """Compressed bytes of the column chunks the plan reads (for measuring pruning)."""
        import pyarrow.parquet as pq

        wanted = set(self.columns) if self.columns is not None else None
        total = 0
        footers: dict[str, Any] = {}
        for t in self.plan():
            if t.uri not in footers:
                fragment = self.query.fragment(t)
                footers[t.uri] = pq.ParquetFile(fragment.path, filesystem=self.query.filesystem).metadata
            rg = footers[t.uri].row_group(t.row_group)
            for c in range(rg.num_columns):
                chunk = rg.column(c)
                if wanted is None or chunk.path_in_schema.split(".")[0] in wanted:
                    total += chunk.total_compressed_size
        return total

    def identity(self) -> dict[str, Any]:
        """What a loader state records of this source, JSON-normalised (a state may travel through JSON)."""
        seed = self.shuffle[0] if self.shuffle is not None else None
        out = {"dataset": self.dataset.name, "version": self.dataset.number, "seed": seed}
        out |= {"sampling": self.described(), **self.rows_of()}
        return json.loads(json.dumps(out))  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class RowGroups(Version):
    """A plain scan: its plan's row groups in epoch order (permuted per (seed, epoch) when shuffled), this
    rank's share of them, read as chunks of whole row groups."""

    WHAT: ClassVar[str] = "a scan"
    SAME_ROWS_EACH_EPOCH: ClassVar[bool] = True

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def plan(self) -> list[ReadTask]:
        """The ReadTasks of this epoch and (when sharded) rank, in reading order: row groups, the footers read
        of this rank's files only."""
        return self.query.expand(self.file_plan())

    def file_plan(self) -> Sequence[ReadTask]:
        """``plan()`` before its files are opened: without a filter or shuffle, one file task per file (the
        log's counts, cut by rows for the rank); else the row groups (a shuffle permutes row groups, and a
        filter's counts need the files)."""
        self.log_read()  # every terminal but to_spark plans first
        if self.shuffle is None:
            tasks = self.query.file_tasks()
        else:
            tasks = self.query.ordered(self.shuffle, self.epoch)
        if self.shard is None:
            return tasks
        return self.query.shard(tasks, *self.shard)

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def split(self, index: int, parts: int) -> list[ReadTask]:
        """One of ``parts`` disjoint pieces of the plan (e.g. a DataLoader worker's), by rows."""
        return self.query.expand(self._file_split(index, parts))

    def _file_split(self, index: int, parts: int) -> Sequence[ReadTask]:
        index, parts = _check_split(index, parts)
        tasks = self.file_plan()
        with translate_missing(self.dataset):
            counts = self.query.task_counts(tasks)  # file tasks: an array, no object per task
        return cut(tasks, counts, share(total(counts), index, parts, "keep"))

    def chunk_spans(self, tasks: Sequence[ReadTask]) -> list[tuple[int, int]]:
        """How ``tasks`` group into chunks: ``[(first, end)]`` task indices, from footer row counts only (no
        filter is evaluated), so the grouping is known before reading and the same on resumption."""
        estimate = [t.length if t.length is not None else t.live_rows for t in tasks]
        return reader.groups(tasks, estimate, reader.chunk_rows(self.query, self.chunk_floor()))

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def count(self) -> int:
        with translate_missing(self.dataset):  # no filter: the log's counts, no file opened
            return total(self.query.task_counts(self.file_plan()))

    def epoch_rows(self) -> sampling.Rows:
        whole = replace(self, shard=None)
        tasks = whole.plan()
        spans = whole.chunk_spans(tasks)
        return sampling.ScanRows(whole.query, tasks, spans, whole.task_rows(tasks), whole.permute())

    def numbered(self) -> Any:
        whole = replace(self, shard=None)
        tasks = whole.plan()
        counts = whole.task_rows(tasks)
        return reader.RowReader(whole.query, tasks, whole.chunk_spans(tasks), counts, whole.permute())

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def iter_chunks(
        self,
        tasks: Sequence[ReadTask] | None = None,
        *,
        skip_rows: int = 0,
        convert: Callable[[pa.Table], T] | None = None,
    ) -> Iterator[Any]:
        """The chunks of ``tasks`` (default: the plan), the first ``skip_rows`` rows dropped (only the chunk
        holding that row is read again), ``convert`` applied on the reading thread."""
        skip_rows = check_int(skip_rows, "skip_rows", minimum=0)
        recorder = Recorder(self)  # from here: planning's footer reads count too
        tasks = self.query.expand(tasks) if tasks is not None else self.plan()  # file tasks: their row groups
        spans = self.chunk_spans(tasks)
        if skip_rows:
            counts = self.task_rows(tasks)  # filter columns only when filtered; footers otherwise
            while spans and skip_rows >= (rows := sum(counts[spans[0][0] : spans[0][1]])):
                skip_rows -= rows
                spans = spans[1:]
        try:
            chunks = reader.read_chunks(
                self.query, tasks, spans, permute=self.permute(), skip=skip_rows, convert=recorder.counting(convert)
            )
            last = -1
            for k, (rows, chunk) in chunks:  # k: the span the chunk came from (a span may come in slices)
                recorder.handed(rows, tasks[spans[k][0] : spans[k][1]] if k != last else ())
                last = k
                yield chunk
        finally:
            self.record(recorder)

    def rank_stream(self, skip: int) -> Stream:
        tasks = self.plan()
        spans = self.chunk_spans(tasks)
        target = reader.chunk_rows(self.query)
        wide = any(sum(t.num_rows for t in tasks[a:b]) > 2 * target for a, b in spans)
        if not skip and not wide:
            # the common case reads straight through: no counts needed (a filtered count would read twice)
            return Stream([self._span_unit(tasks, s) for s in spans], -1, 0)
        # resuming, or row groups of many chunks' decoded size (images, tensors: a unit of chunk_rows keeps
        # a worker's first message and its memory proportional to the chunk; a worker reading a slice reads
        # the row group's encoded bytes and decodes only the slice)
        r = reader.RowReader(self.query, tasks, spans, self.task_rows(tasks), self.permute())
        units: list[Unit] = []
        i = max(next((k for k in range(len(r.spans)) if r.starts[k + 1] > skip), len(r.spans)), 0)
        for k in range(i, len(r.spans)):
            lo, hi = max(skip, r.starts[k]), r.starts[k + 1]
            step = target if hi - lo > 2 * target else max(hi - lo, 1)
            units.extend(rows_unit(r, [(a, min(a + step, hi))]) for a in range(lo, hi, step))
        return Stream(units, r.total - skip, 0)

    def _span_unit(self, tasks: list[ReadTask], span: tuple[int, int]) -> Unit:
        def unit() -> pa.Table:
            a, b = span
            with translate_missing(self.dataset):
                table = reader.read_span(self.query, tasks[a:b])
            return reader.combine([table], tasks[a], self.permute())

        return unit

    def rank_rows(self, worker: int | None = None, workers: int | None = None) -> int:
        tasks = self._file_split(worker, workers) if workers is not None and worker is not None else self.file_plan()
        with translate_missing(self.dataset):
            return total(self.query.task_counts(tasks))

    def worker_chunks(
        self, worker: int, workers: int, convert: Callable[[pa.Table], T], skip: int = 0
    ) -> Iterator[Any]:
        return self.iter_chunks(self.split(worker, workers), skip_rows=skip, convert=convert)


@dataclass(frozen=True, kw_only=True)
class Picked(Version):
    """A sampled or class-balanced scan: each epoch, the rows ``selection`` picks (``dal.read.sampling``), read
    as virtual rows."""

    selection: sampling.Selection
    WHAT: ClassVar[str] = "a sampled or balanced scan"

    def described(self) -> Any:
        return sampling.describe(self.selection)

    def epoch_rows(self) -> sampling.PickRows:
        return sampling.PickRows(self)

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def plan(self) -> list[ReadTask]:
        """The picked row groups this rank reads (read whole)."""
        self.log_read()
        rows = self.epoch_rows()
        return rows.tasks_in(sampling.rank_ranges(rows.total, self.shard))

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def count(self) -> int:
        self.log_read()
        return super().count()

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def iter_chunks(
        self,
        tasks: Sequence[ReadTask] | None = None,
        *,
        skip_rows: int = 0,
        convert: Callable[[pa.Table], T] | None = None,
    ) -> Iterator[Any]:
        skip_rows = check_int(skip_rows, "skip_rows", minimum=0)
        if tasks is not None:
            raise FilterError(f"{self.WHAT} is read whole (its rank's share), not by tasks")
        self.log_read()
        recorder = Recorder(self)
        units, _rows = sampling.rank_units(self.epoch_rows(), self.shard, skip_rows)
        try:
            for rows, chunk in sampling.read_units(units, recorder.counting(convert)):
                recorder.handed(rows)
                yield chunk
        finally:
            self.record(recorder)
