"""Scan: an immutable reading plan over one pinned version.

    scan = (dal.open("weather.radar", "prod").scan()
            .select("ts", "station", "reflectivity")
            .filter("station = 'YUL' AND label >= 0")
            .window("2026-01-01", "2026-01-02")
            .shard(rank, world_size)
            .shuffle(seed=42))
    for batch in scan.iter_batches(1024, num_epochs=3): ...

Every builder call returns a new Scan and validates its arguments (unknown columns, type mismatches,
malformed SQL, a bad rank, an empty window) before any data is read. Terminals delegate along the data
flow: ``dal.read.plan`` turns the scan into ReadTasks (pruning, shuffling row groups, sharding: list
arithmetic), ``dal.read`` reads them in large chunks on threads, and batches are slices of the chunks.

Why one module: ``Scan`` is the public reading value: each builder method and terminal is a few lines that
delegate to ``dal.read`` or ``dal.adapters``; most of the length is their docstrings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import replace as _with  # sample()/balance() take an argument named replace
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import pyarrow as pa
import pyarrow.compute as pc

from dal import expr as E
from dal.errors import FilterError, check_int, require, translating
from dal.feeds import Feeds
from dal.read import reader, sampling
from dal.read.changed import Changes, change_schema
from dal.read.pinned import PLAN_CACHE, Pinned
from dal.read.plan import Query, Window, as_datetime, window_expr
from dal.read.sequences import windows
from dal.read.sharding import Remainder
from dal.read.source import Picked, RowGroups, Source, Version
from dal.read.stats import ReadStats, StatsBox
from dal.read.tasks import ReadTask

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl
    import ray.data
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

    from dal.adapters.torch import MapDataset
    from dal.catalog.types import VersionInfo
    from dal.read.access import RowIndex

__all__ = ["PLAN_CACHE", "Scan", "Window"]
T = TypeVar("T")


class Draws:
    """``sample`` and ``balance`` of a ``Scan`` and a ``Dataset`` (a whole-version scan), defined once."""

    def _as_scan(self) -> Scan:
        raise NotImplementedError

    def sample(
        self,
        fraction: float | None = None,
        *,
        rows: int | None = None,
        seed: int = 0,
        replace: bool = False,
        spread: float = sampling.DEFAULT_SPREAD,
        windows: int | None = None,
    ) -> Scan:
        """A different random sample of the rows each epoch: each row kept with probability ``fraction``
        (the count varies around fraction·N), or exactly ``rows`` rows; a pure function of (seed, epoch,
        version). Row groups are picked with probability min(1, max(spread·fraction, 16 / row groups)) and
        rows inside the picked ones with the rest, so a 1% sample of many row groups reads about ``spread`` %
        of the bytes (``spread=math.inf``: every row group, rows drawn one by one). ``rows=n`` draws the n rows
        among spread·n rows covered by ``windows`` (default 16) windows evenly spread over the scan's row groups
        (in a random order each epoch), so an epoch's rows come from all over the scan at the I/O of about
        ``windows`` row groups plus spread·n rows; ``windows=1`` reads the least but draws each epoch from a few
        neighbouring row groups. Every row's chance is exactly n/N. ``replace=True``: with replacement. See
        ``dal.read.sampling``.

        Args:
            fraction: Probability of keeping each row.
            rows: Exactly this many rows instead.
            seed: The draws' seed.
            replace: Draw with replacement.
            spread: How many chunks a draw spreads over.
            windows: Contiguous windows per epoch.

        Raises:
            FilterError: neither or both of fraction/rows, or a bad value.
        """
        scan = self._as_scan()
        scan._check_drawable()
        checked = sampling.check_sample(fraction, rows, seed, replace, spread, windows)
        return _with(scan, sample_=checked, stats_=StatsBox())

    def balance(
        self,
        by: str,
        weights: dict[Any, float] | str = "uniform",
        *,
        rows: int | None = None,
        seed: int = 0,
        replace: bool = False,
    ) -> Scan:
        """Class-balanced draws per epoch: class ``c`` of column ``by`` makes ``weights[c] / sum(weights)``
        of the epoch's rows (``"uniform"``: every class alike; classes left out of ``weights`` are left
        out). ``rows``: rows per epoch (default: as many as the scarcest class allows without
        replacement, the scan's row count with). Per-class counts come from one pass over ``by`` per
        pinned version (cached). See ``dal.read.sampling``.

        Args:
            by: The class column.
            weights: Share per class, or ``uniform``.
            rows: Rows per epoch.
            seed: The draws' seed.
            replace: Draw with replacement.

        Raises:
            FilterError: an unknown column or class, or a bad weight.
        """
        scan = self._as_scan()
        scan._check_drawable()
        scan._check_columns([by], "balance")
        checked = sampling.check_balance(by, weights, rows, seed, replace)
        sampling.check_balance_column(scan, checked)  # a class column, weights of its type
        return _with(scan, sample_=checked, stats_=StatsBox())


@dataclass(frozen=True)
class Scan(Feeds, Draws):
    """A plan for reading one pinned version; nothing is read until a terminal call."""

    dataset: Pinned
    columns: tuple[str, ...] | None = None
    filters: tuple[E.Expr, ...] = ()
    window_: Window | None = None
    shard_: tuple[int, int, Remainder] | None = None
    shuffle_: tuple[int, int] | None = None  # (seed, rows a shuffled chunk holds at least)
    epoch: int = 0
    sample_: sampling.Selection | None = None  # sample / balance: a per-epoch selection (dal.read.sampling)
    # a change read (``Dataset.changes``): since which version, and the dataset's recorded versions
    changes_: tuple[int | None, tuple[VersionInfo, ...]] | None = field(default=None, repr=False)
    # the reads made through this scan (``stats()``): shared with its set_epoch copies, new for a narrowed scan
    stats_: StatsBox = field(default_factory=StatsBox, compare=False, repr=False)

    # -- schema ---------------------------------------------------------------------------------

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of what the scan returns: columns a format stores in another type (a Delta
        tensor as binary, uint8 as short) in the type they were written with (``dal.formats.logical``)."""
        from dal.formats.logical import logical_schema

        if self.changes_ is not None:
            return change_schema(self.dataset.arrow_schema())
        return logical_schema(self.dataset.arrow_schema())

    @property
    def physical_schema(self) -> pa.Schema | None:
        """The schema as the data files name it, when that differs (Delta column mapping)."""
        return self.query.physical

    def _check_columns(self, names: Sequence[str], what: str) -> None:
        from dal.catalog.errors import suggest

        for n in names:
            if not isinstance(n, str):
                raise FilterError(f"a column name in {what} must be a string, not {type(n).__name__}")
            if n not in self.arrow_schema.names:
                hint = suggest(n, self.arrow_schema.names)
                raise FilterError(f"unknown column {n!r} in {what} of {self.dataset.name}{hint}")

    @property
    def output_names(self) -> list[str]:
        """The columns this scan yields, in order."""
        return list(self.columns) if self.columns is not None else list(self.arrow_schema.names)

    # -- builder --------------------------------------------------------------------------------

    def select(self, *columns: str) -> Scan:
        """Read only these columns (only their bytes are read).

        Args:
            *columns: Column names.

        Raises:
            FilterError: no columns, or a name the dataset does not have.
        """
        if len(columns) == 1 and isinstance(columns[0], list | tuple):
            columns = tuple(columns[0])
        if not columns:  # a table of no columns has no rows to show: count() counts without reading columns
            raise FilterError("select needs at least one column; count() counts the rows without reading any")
        self._check_columns(columns, "select")
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise FilterError(f"select names {', '.join(map(repr, twice))} more than once")
        return replace(self, columns=tuple(columns), stats_=StatsBox())

    def filter(self, condition: E.Expr | str) -> Scan:
        """Keep rows matching ``condition`` (``dal.col`` expressions or a SQL WHERE string); several
        filters combine with AND.

        Args:
            condition: A ``dal.col`` expression or a SQL WHERE string.
        """
        bound = E.bind(E.as_expr(condition), self.arrow_schema)
        return replace(self, filters=(*self.filters, bound), stats_=StatsBox())

    def window(
        self, start: datetime | date | str | None, end: datetime | date | str | None, column: str | None = None
    ) -> Scan:
        """Rows with ``start <= column < end`` on the time column (the dataset's, unless named); ``None`` for
        either bound leaves that side open. Windows chain like filters: each one narrows the rows (the
        intersection of all the windows).

        Time-partitioned directories (``date=…``, ``date=…/hour=…``) are pruned only when dal knows how they
        derive from the time column (``dal.storage.timeparts``); otherwise the window is a filter, still pushed down to
        partition values and row-group statistics.

        Args:
            start: Lower bound (None: open).
            end: Upper bound, excluded (None: open).
            column: The time column (default: the dataset's).

        Raises:
            FilterError: no time column, a bad bound, or an empty window.
        """
        column = column or self.dataset.info.time_column
        if column is None:
            raise FilterError(f"{self.dataset.name} has no time column; pass window(..., column='ts')")
        self._check_columns([column], "window")
        if start is None and end is None:
            raise FilterError("window needs a start or an end (None leaves one side open)")
        lo = as_datetime(start, "window start") if start is not None else None
        hi = as_datetime(end, "window end") if end is not None else None
        if lo is not None and hi is not None and lo >= hi:
            raise FilterError(f"empty window: start {lo.isoformat()} is not before end {hi.isoformat()}")
        typ = self.arrow_schema.field(column).type
        if not (pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_integer(typ)):
            raise FilterError(f"window column {column!r} is {typ}; it must be a timestamp, date or epoch seconds")
        new = Window(lo, hi, column)
        old = self.window_
        if old is None:
            return replace(self, window_=new, stats_=StatsBox())
        if old.column == column:  # the intersection (it may be empty: no rows, as two disjoint filters give)
            return replace(self, window_=old.intersect(new), stats_=StatsBox())
        # windows on two columns: the one on the dataset's time column stays the window (time partitions
        # prune by it), the other becomes a filter
        keep, other = (old, new) if old.column == self.dataset.info.time_column else (new, old)
        filters = (*self.filters, window_expr(other, self.arrow_schema))
        return replace(self, window_=keep, filters=filters, stats_=StatsBox())

    def shard(self, rank: int, world_size: int, remainder: Remainder = "pad") -> Scan:
        """This rank's share of the rows: disjoint from other ranks', deterministic, and by default the
        same number of rows on every rank (``remainder``: "pad" | "drop" | "keep", see dal.read.sharding).

        Args:
            rank: This process's rank.
            world_size: The number of ranks.
            remainder: ``pad`` (equal rows: some repeated), ``drop`` (equal rows: the rest dropped) or ``keep``.

        Raises:
            FilterError: a bad rank, world size or remainder, or a scan sharded already.
        """
        # any integer (a NumPy one too) as a Python int; a bool is refused (True was rank 1)
        world_size, rank = check_int(world_size, "world_size"), check_int(rank, "rank")
        if world_size < 1:
            raise FilterError(f"world_size must be a positive int, got {world_size!r}")
        if not 0 <= rank < world_size:
            raise FilterError(f"rank must be in [0, {world_size}), got {rank!r}")
        if remainder not in ("pad", "drop", "keep"):
            raise FilterError(f"remainder must be 'pad', 'drop' or 'keep', not {remainder!r}")
        return replace(self, shard_=(rank, world_size, remainder), stats_=StatsBox())

    def shuffle(self, seed: int, buffer_size: int = 10_000) -> Scan:
        """Permute row groups per epoch, and rows inside each chunk read (chunks hold whole row groups and
        at least ``buffer_size`` rows; no per-row buffer).

        The order is a pure function of (seed, epoch, version, shard): the same on every run.

        Args:
            seed: The order's seed.
            buffer_size: Rows a chunk holds at least.
        """
        seed = check_int(seed, "shuffle seed", minimum=0)
        buffer_size = check_int(buffer_size, "shuffle buffer_size", minimum=1, maximum=2**31 - 1)
        return replace(self, shuffle_=(seed, buffer_size), stats_=StatsBox())

    def _as_scan(self) -> Scan:
        return self

    def _check_drawable(self) -> None:
        if self.sample_ is not None:
            raise FilterError("this scan is already sampled or balanced: sample or balance once")
        if self.changes_ is not None:
            raise FilterError("a change read (changes(since=...)) is not sampled or balanced; shuffle it instead")

    def set_epoch(self, epoch: int) -> Scan:
        """The scan for another epoch (a new order when shuffling).

        Args:
            epoch: The epoch number.
        """
        return replace(self, epoch=check_int(epoch, "epoch", minimum=0, maximum=2**63 - 1))

    # -- the read source (dal.read.source): what the terminals hand down -------------------------------

    @cached_property
    def _source(self) -> Version:
        """This scan as the read engine's frozen value (built once per scan; its reads count in ``stats_``)."""
        if self.changes_ is not None:
            since, versions = self.changes_
            return Changes(
                pinned=self.dataset, columns=self.columns, filters=self.filters, window=self.window_,
                shuffle=self.shuffle_, shard=self.shard_, epoch=self.epoch, stats=self.stats_, since=since,
                versions=versions,
            )  # fmt: skip
        if self.sample_ is None:
            return RowGroups(
                pinned=self.dataset, columns=self.columns, filters=self.filters, window=self.window_,
                shuffle=self.shuffle_, shard=self.shard_, epoch=self.epoch, stats=self.stats_,
            )  # fmt: skip
        return Picked(
            pinned=self.dataset, columns=self.columns, filters=self.filters, window=self.window_,
            shuffle=self.shuffle_, shard=self.shard_, epoch=self.epoch, stats=self.stats_, selection=self.sample_,
        )  # fmt: skip

    def _feed(self) -> Source:
        return self._source

    @property
    def query(self) -> Query:
        """What planning and reading see of this scan (its filters, window and projection)."""
        return self._source.query

    @property
    def condition(self) -> E.Expr | None:
        """The filters and window as one bound dal expression (None: every row)."""
        return self.query.condition

    @property
    def row_filter(self) -> pc.Expression | None:
        """The filters and window as a pyarrow expression (None: every row)."""
        return self.query.row_filter

    def plan(self, *, row_groups: bool = True) -> Sequence[ReadTask]:
        """The ReadTasks this scan reads, for its epoch and (when sharded) its rank, in reading order.

        Args:
            row_groups: True (default): one task per row group, the footers of the files this rank reads
                opened. False: the plan before any file is opened: without a filter or shuffle, one task per
                file (``ReadTask.whole_file``), its rows the count the table's log records, so planning costs
                the log; ``iter_batches(tasks=...)``, ``task_rows`` and ``split`` take these tasks too."""
        return self._source.plan() if row_groups else self._source.file_plan()

    def split(self, index: int, parts: int) -> list[ReadTask]:
        """One of ``parts`` disjoint pieces of this scan's plan (e.g. a DataLoader worker's), by rows.

        Args:
            index: Which piece.
            parts: How many pieces.

        Raises:
            FilterError: a bad index or count, or a sampled scan (split by rows instead)."""
        return self._source.split(index, parts)

    def task_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        """Rows each of these tasks (of this scan's plan or a split of it) yields, counted, not read.

        Args:
            tasks: Read tasks of this scan."""
        return self._source.task_rows(tasks)

    def count(self) -> int:
        """Rows this scan yields (counts matching rows when filtered; no data columns are read)."""
        return self._source.count()

    def iter_chunks(
        self,
        tasks: Sequence[ReadTask] | None = None,
        *,
        skip_rows: int = 0,
        convert: Callable[[pa.Table], T] | None = None,
    ) -> Iterator[Any]:
        """This epoch's rows as large chunks (Arrow tables of whole row groups, tens of thousands of rows,
        sized from the footers; rows permuted inside each chunk when shuffling), read ahead on threads.

        Args:
            tasks: Read these tasks (default: this scan's plan; a ``split`` of it).
            skip_rows: Drop the first rows (resuming: only the chunk holding that row is read again).
            convert: Applied to each chunk in the reading thread.

        Raises:
            FilterError: tasks given for a sampled or balanced scan."""
        return self._source.iter_chunks(tasks, skip_rows=skip_rows, convert=convert)

    def stats(self) -> ReadStats:
        """What the reads made through this scan did: rows, chunks, bytes read, files and row groups read and pruned,
        seconds, file-cache hits and misses (see ``dal.read.stats.ReadStats``), summed over its passes (epochs).
        All zero before the first read; a narrowed scan (``select``, ``filter``, …) counts its own."""
        return self.stats_.get(self.dataset.name, self.dataset.number)

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def iter_batches(
        self,
        batch_size: int = 65_536,
        *,
        num_epochs: int = 1,
        tasks: Sequence[ReadTask] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of exactly ``batch_size`` rows (the last of each epoch may be shorter): slices
        of the chunks ``iter_chunks`` reads ahead. With ``num_epochs``, epochs run ``epoch, epoch+1, …``
        (each reshuffled when shuffling). ``tasks`` reads part of the plan (first epoch only).

        Args:
            batch_size: Rows per batch.
            num_epochs: Epochs to read in a row.
            tasks: Read these tasks (default: the plan).
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
        num_epochs = check_int(num_epochs, "num_epochs", minimum=0)
        for e in range(num_epochs):
            scan = self.set_epoch(self.epoch + e) if e else self
            yield from reader.rebatch(scan.iter_chunks(tasks if e == 0 else None), batch_size)

    def to_arrow(self) -> pa.Table:
        """All the rows of this scan as one Arrow table (its columns, in read order)."""
        chunks = list(self.iter_chunks())
        if not chunks:
            schema = self.arrow_schema
            return pa.Table.from_batches([], schema=pa.schema([schema.field(n) for n in self.output_names]))
        return pa.concat_tables(chunks)

    def to_pandas(self) -> pd.DataFrame:
        """All the rows of this scan as a pandas DataFrame (``to_arrow().to_pandas()``; a fixed-shape tensor column
        holds one (*shape) array per cell)."""
        from dal.tensors.schema import to_pandas_cells

        require("pandas", "pandas")  # before reading: pyarrow's to_pandas says only "No module named 'pandas'"
        return to_pandas_cells(self.to_arrow())

    def to_torch_map(self, *, cache_bytes: int | None = None) -> MapDataset:
        """A map-style ``torch.utils.data.Dataset`` of this scan's rows by position (``len``, ``ds[i]``,
        batched ``__getitems__``), for samplers such as ``DistributedSampler``.

        Args:
            cache_bytes: Decoded row groups kept per process (default 256 MiB).
        """
        self._source.require_files("to_torch_map")
        self._source.log_read()
        from dal.adapters.torch import MapDataset

        return MapDataset(self._source, cache_bytes=cache_bytes)

    def rows(self) -> RowIndex:
        """Random access to this scan's rows by position: a ``dal.read.access.RowIndex`` (``len(index)``,
        ``index.take(positions)`` -> Arrow), positions in ``to_arrow()``'s order. Plans once; keep it for
        repeated access.

        Raises:
            DalError: a sampled or balanced scan."""
        self._source.require_files("rows")
        self._source.log_read()
        from dal.read.access import RowIndex

        return RowIndex(self._source)

    def take(self, indices: Sequence[int]) -> pa.Table:
        """The rows at positions ``indices`` (in ``to_arrow()``'s order; negative from the end), in that
        order, as one Arrow table. Plans on each call: use ``rows()`` for repeated access.

        Args:
            indices: Row positions (negative ones count from the end).

        Raises:
            IndexError: a position out of range (of any width: a uint64 past 2**63-1 too); TypeError: positions
                that are not integers (bools, floats, timedelta64: ``RowIndex.positions``); DalError: a sampled or
                balanced scan."""
        index: pa.Table = self.rows().take(indices)
        return index

    def to_spark(self, spark: SparkSession | None = None) -> SparkDataFrame:
        """This scan as a Spark DataFrame of the pinned version, projection and filters pushed into Spark. A change
        read (``Dataset.changes``) is handed to Spark as the Arrow rows ``to_arrow`` returns, from the driver.

        Args:
            spark: The SparkSession (default: the active one).

        Raises:
            FilterError: a sampled scan (Spark samples itself).
        """
        if self.sample_ is not None:
            raise FilterError("to_spark does not draw dal samples: use DataFrame.sample / sampleBy in Spark")
        source = self._source
        if isinstance(source, Changes):  # a change read: its rows (filtered, projected, this rank's) from Arrow
            from dal.spark.read import rows_to_spark

            changed: SparkDataFrame = rows_to_spark(self.to_arrow(), spark)
            return changed
        source.require_files("to_spark")
        assert isinstance(source, RowGroups)
        source.log_read()
        from dal.spark.read import scan_to_spark

        frame: SparkDataFrame = scan_to_spark(source, spark)
        return frame

    @overload
    def to_polars(self, lazy: Literal[True] = ...) -> pl.LazyFrame: ...
    @overload
    def to_polars(self, lazy: Literal[False]) -> pl.DataFrame: ...
    @overload
    def to_polars(self, lazy: bool) -> pl.LazyFrame | pl.DataFrame: ...
    def to_polars(self, lazy: bool = True) -> pl.LazyFrame | pl.DataFrame:
        """A polars LazyFrame (or DataFrame) reading this scan (see ``dal.adapters.polars``).

        Args:
            lazy: A LazyFrame (True) or a collected DataFrame (False).
        """
        self._source.log_read()
        from dal.adapters.polars import to_polars

        return to_polars(self._source, lazy)

    def to_duckdb(
        self, connection: duckdb.DuckDBPyConnection | None = None, name: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over this scan, also view ``name`` when given (see ``dal.adapters.duckdb``).

        Args:
            connection: A DuckDB connection (default: a new in-memory one).
            name: Also register the relation as this view.
        """
        self._source.log_read()
        from dal.adapters.duckdb import to_duckdb

        return to_duckdb(self._source, connection, name)

    def to_ray(self, **read_args: Any) -> ray.data.Dataset:
        """A Ray Data ``Dataset`` read by dal's reader on the Ray workers (see ``dal.adapters.ray``).

        Args:
            **read_args: ``ray.data.read_datasource``'s keyword arguments.

        Raises:
            FilterError: a sampled scan, or an unknown Ray argument.
        """
        if self.sample_ is not None:  # Ray's read tasks cut the plan by chunks: they cannot draw dal's rows
            raise FilterError("to_ray does not draw dal samples: use Dataset.random_sample / groupby in Ray Data")
        source = self._source
        source.require_files("to_ray")
        assert isinstance(source, RowGroups)
        source.log_read()
        from dal.adapters.ray import to_ray

        return to_ray(source, **read_args)

    def to_numpy(self) -> dict[str, Any]:
        """Columns as NumPy, tensor fields decoded (see ``Dataset.to_numpy``)."""
        return self.dataset.decode(self.to_arrow())

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def sequences(
        self,
        length: int,
        step: int = 1,
        *,
        column: str | None = None,
        by: str | None = None,
        max_gap: timedelta | float | None = None,
    ) -> Iterator[pa.Table]:
        """Fixed-length, time-ordered windows of ``length`` rows, starting every ``step`` rows.

        Windows never cross entities (``by``, e.g. a station id) and never span a jump in ``column``
        larger than ``max_gap`` (like Petastorm's NGram delta threshold). The scan's rows are sorted by
        (``by``, ``column``) in memory, so narrow the scan (select / window / shard) to what fits.

        Args:
            length: Rows per window.
            step: Rows between window starts.
            column: The time column (default: the dataset's).
            by: Entity column windows never cross.
            max_gap: Largest time step inside a window.

        Raises:
            FilterError: a bad length / step, or unknown columns.
        """
        length = check_int(length, "sequences length", minimum=1)
        step = check_int(step, "sequences step", minimum=1)
        column = column or self.dataset.info.time_column
        if column is None:
            raise FilterError(f"{self.dataset.name} has no time column; pass sequences(..., column='ts')")
        keys = [c for c in (by, column) if c is not None]
        self._check_columns(keys, "sequences")
        scan = self if self.columns is None else replace(self, columns=tuple(dict.fromkeys([*self.columns, *keys])))
        yield from windows(scan.to_arrow(), length, step, column, by, max_gap)

    def bytes_planned(self) -> int:
        """Compressed bytes of the column chunks this scan reads (for measuring pruning)."""
        return self._source.bytes_planned()
