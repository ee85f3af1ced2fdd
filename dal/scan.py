"""Scan: an immutable reading plan over one pinned version.

    scan = (dal.open("weather.radar", "prod").scan()
            .select("ts", "station", "reflectivity")
            .filter("station = 'YUL' AND label >= 0")
            .window("2026-01-01", "2026-01-02")
            .shard(rank, world_size)
            .shuffle(seed=42, buffer_size=10_000))
    for batch in scan.iter_batches(1024, num_epochs=3): ...

Every builder call returns a new Scan and validates its arguments (unknown columns, type mismatches,
malformed SQL, a bad rank, an empty window) before any data is read. ``plan()`` turns the scan into
ReadTasks: files whose partitions the filter or window rule out are dropped, then row groups whose
statistics rule them out; sharding and shuffling are list arithmetic over the remaining tasks.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dal import expr as E
from dal.errors import FilterError, check_int, translating
from dal.formats.base import DataFile
from dal.formats.fragments import (
    dataset_from_files,
    parquet_format,
    partition_expression,
    read_exact,
    row_group_starts,
)
from dal.sharding import Remainder, assign, share
from dal.tasks import ReadTask

if TYPE_CHECKING:
    import pandas as pd

    from dal.dataset import Dataset

DATE_PARTITION_NAMES = ("date", "day", "dt", "ds")
PREFETCH_BATCHES = 4
PLAN_CACHE = 32  # plans (per filter and window) kept per opened version
# decoded bytes pyarrow may hold ahead of the consumer; sizes its read-ahead so memory stays bounded
# whatever the row-group size of the data (measured: benchmarks/reader_bench.py, peak RSS rows)
READAHEAD_BUDGET = 128 * 1024 * 1024


def _as_datetime(value: datetime | date | str, what: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise FilterError(f"{what} {value!r} is not an ISO date or timestamp") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise FilterError(f"{what} must be a datetime, date or ISO string, not {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # naive = UTC, as everywhere in dal


def _epoch_seconds(moment: datetime) -> Decimal:
    """Seconds since the epoch, exactly (a float would round microseconds away)."""
    return Decimal((moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)).scaleb(-6)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    column: str


@dataclass(frozen=True)
class Scan:
    """A plan for reading one pinned version; nothing is read until a terminal call."""

    dataset: Dataset
    columns: tuple[str, ...] | None = None
    filters: tuple[E.Expr, ...] = ()
    window_: Window | None = None
    shard_: tuple[int, int, Remainder] | None = None
    shuffle_: tuple[int, int] | None = None  # (seed, buffer rows)
    epoch: int = 0

    # -- schema ---------------------------------------------------------------------------------

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.dataset.arrow_schema()

    def _check_columns(self, names: Sequence[str], what: str) -> None:
        import difflib

        for n in names:
            if not isinstance(n, str):
                raise FilterError(f"a column name in {what} must be a string, not {type(n).__name__}")
            if n not in self.arrow_schema.names:
                close = difflib.get_close_matches(n, self.arrow_schema.names, n=3)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                raise FilterError(f"unknown column {n!r} in {what} of {self.dataset.name}{hint}")

    # -- builder --------------------------------------------------------------------------------

    def select(self, *columns: str) -> Scan:
        """Read only these columns (only their bytes are read)."""
        if len(columns) == 1 and isinstance(columns[0], list | tuple):
            columns = tuple(columns[0])
        self._check_columns(columns, "select")
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise FilterError(f"select names {', '.join(map(repr, twice))} more than once")
        return replace(self, columns=tuple(columns))

    def filter(self, condition: E.Expr | str) -> Scan:
        """Keep rows matching ``condition`` (``dal.col`` expressions or a SQL WHERE string); several
        filters combine with AND."""
        bound = E.bind(E.as_expr(condition), self.arrow_schema)
        return replace(self, filters=(*self.filters, bound))

    def window(self, start: datetime | date | str, end: datetime | date | str, column: str | None = None) -> Scan:
        """Rows with ``start <= column < end`` on the time column (the dataset's, unless named).

        Prunes time-partitioned directories (``date=…``, ``date=…/hour=…``, epoch seconds) and row groups.
        """
        column = column or self.dataset.info.time_column
        if column is None:
            raise FilterError(f"{self.dataset.name} has no time column; pass window(..., column='ts')")
        self._check_columns([column], "window")
        lo, hi = _as_datetime(start, "window start"), _as_datetime(end, "window end")
        if lo >= hi:
            raise FilterError(f"empty window: start {lo.isoformat()} is not before end {hi.isoformat()}")
        typ = self.arrow_schema.field(column).type
        if not (pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_integer(typ)):
            raise FilterError(f"window column {column!r} is {typ}; it must be a timestamp, date or epoch seconds")
        return replace(self, window_=Window(lo, hi, column))

    def shard(self, rank: int, world_size: int, remainder: Remainder = "pad") -> Scan:
        """This rank's share of the rows: disjoint from other ranks', deterministic, and by default the
        same number of rows on every rank (``remainder``: "pad" | "drop" | "keep", see dal.sharding)."""
        if not isinstance(world_size, int) or world_size < 1:
            raise FilterError(f"world_size must be a positive int, got {world_size!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise FilterError(f"rank must be in [0, {world_size}), got {rank!r}")
        if remainder not in ("pad", "drop", "keep"):
            raise FilterError(f"remainder must be 'pad', 'drop' or 'keep', not {remainder!r}")
        return replace(self, shard_=(rank, world_size, remainder))

    def shuffle(self, seed: int, buffer_size: int = 10_000) -> Scan:
        """Permute row groups per epoch and mix rows through a buffer of ``buffer_size`` rows.

        The same seed and epoch give the same order on every rank and every run."""
        seed = check_int(seed, "shuffle seed", minimum=0)
        buffer_size = check_int(buffer_size, "shuffle buffer_size", minimum=1, maximum=2**31 - 1)
        return replace(self, shuffle_=(seed, buffer_size))

    def set_epoch(self, epoch: int) -> Scan:
        """The scan for another epoch (a new order when shuffling)."""
        return replace(self, epoch=check_int(epoch, "epoch", minimum=0, maximum=2**63 - 1))

    # -- planning --------------------------------------------------------------------------------

    @property
    def row_filter(self) -> pc.Expression | None:
        exprs = list(self.filters)
        if self.window_ is not None:
            exprs.append(self._window_expr(self.window_))
        if not exprs:
            return None
        out = exprs[0]
        for e in exprs[1:]:
            out = E.And(out, e)
        return E.to_arrow(out, self.arrow_schema)

    def _window_expr(self, w: Window) -> E.Expr:
        typ = self.arrow_schema.field(w.column).type
        lo: Any
        hi: Any
        if pa.types.is_integer(typ):  # epoch seconds, compared exactly (bind rounds to whole seconds)
            lo, hi = _epoch_seconds(w.start), _epoch_seconds(w.end)
        else:
            lo, hi = w.start, w.end
        return E.bind(E.And(E.Col(w.column) >= lo, E.Col(w.column) < hi), self.arrow_schema)

    @cached_property
    def _pa_dataset(self) -> pads.FileSystemDataset:
        ds = self.dataset
        return dataset_from_files(self._files(), self.arrow_schema, ds.location, ds.storage_options)

    def _files(self) -> list[DataFile]:
        files = self.dataset.files()
        if self.window_ is not None:
            files = _prune_time_partitions(files, self.window_)
        return files

    def _all_tasks(self) -> list[ReadTask]:
        """Every row group that partitions and statistics do not rule out, in a deterministic order.

        Cached on the Dataset per (filters, window): the pinned version never changes, so the footers
        are read once however many scans and epochs follow."""
        store = self._store
        if "tasks" not in store:
            flt = self.row_filter
            mapped = self._physical is not None
            pruning = self._mapped_pruning() if mapped and flt is not None else None
            tasks = []
            uri_of = {f.uri: f for f in self._files()}
            paths = {self._local_path(u): u for u in uri_of}
            fragments: dict[str, pads.ParquetFileFragment] = {}
            for fragment in self._pa_dataset.get_fragments(filter=flt if flt is not None else pc.scalar(True)):
                uri = paths.get(fragment.path, fragment.path)
                fragments[uri] = fragment  # keeps its footer once split_by_row_group has read it
                values = uri_of[uri].partition_values if uri in uri_of else ()
                deleted = uri_of[uri].deleted_rows if uri in uri_of else ()
                if flt is not None and not mapped:
                    pieces = fragment.split_by_row_group(filter=flt, schema=self.arrow_schema)
                elif pruning is not None and pruning[2] <= set(fragment.physical_schema.names):
                    # column mapping: statistics carry the physical names, so prune by the data-column
                    # terms of the filter renamed to them (only where the file has every one of them)
                    pieces = fragment.split_by_row_group(filter=pruning[0], schema=pruning[1])
                else:
                    pieces = fragment.split_by_row_group(schema=self.arrow_schema)
                starts = row_group_starts(fragment.path, fragment.filesystem) if deleted else []
                for piece in pieces:
                    for rg in piece.row_groups:
                        gone = _deleted_in(deleted, starts[rg.id], rg.num_rows) if deleted else ()
                        exact = mapped or bool(deleted)
                        tasks.append(ReadTask(uri, rg.id, values, rg.num_rows, deleted=gone, exact=exact))
            tasks.sort(key=lambda t: (t.uri, t.row_group))
            store["fragments"] = fragments
            store["tasks"] = tasks
        return list(store["tasks"])

    @property
    def _store(self) -> dict[str, Any]:
        """This scan's plan cache (tasks, footers, matching-row counts), shared by scans with its filters
        and window. The last PLAN_CACHE of them are kept: a process trying many filters stays bounded."""
        scans: OrderedDict[str, dict[str, Any]] = self.dataset._plans.setdefault("scans", OrderedDict())
        key = repr((self.filters, self.window_))
        store = scans.get(key)
        if store is None:
            store = scans.setdefault(key, {})  # atomic: the prefetch thread asks too
            while len(scans) > PLAN_CACHE:
                scans.popitem(last=False)  # least recently used
        else:
            with contextlib.suppress(KeyError):  # evicted meanwhile by another thread: still a valid cache
                scans.move_to_end(key)
        return store

    def _local_path(self, uri: str) -> str:
        from dal import io

        return io.filesystem(uri, self.dataset.storage_options)[1]

    def _matching_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        """Rows per task that pass the filter (a read of the filter columns only when there is a filter)."""
        flt = self.row_filter
        if flt is None:
            return [t.live_rows for t in tasks]
        counted: dict[tuple[str, int], int] = self._store.setdefault("matching", {})
        for t in tasks:
            if (t.uri, t.row_group) not in counted and t.exact:  # deletion vectors, column mapping
                counted[(t.uri, t.row_group)] = self._read_exact(t, _filter_columns(self)).filter(flt).num_rows
            if (t.uri, t.row_group) not in counted:
                # a scan over the dataset's schema: the filter may name partition columns, which the file
                # lacks and the fragment's partition expression supplies. Not count_rows(): when the filter
                # holds for the whole partition, pyarrow 26 counts every row group of the file, not this one.
                scanner = pads.Scanner.from_fragment(
                    self._fragment(t), schema=self.arrow_schema, filter=flt, columns=[]
                )
                counted[(t.uri, t.row_group)] = sum(b.num_rows for b in scanner.to_batches())
        return [counted[(t.uri, t.row_group)] for t in tasks]

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def plan(self) -> list[ReadTask]:
        """The ReadTasks this scan reads, for its epoch and (when sharded) its rank, in reading order."""
        from dal.dataset import _translate_missing

        with _translate_missing(self.dataset):  # planning reads footers: a vacuumed file fails here
            tasks = self._all_tasks()
        if self.shuffle_ is not None:
            rng = np.random.default_rng([self.shuffle_[0], self.epoch])
            tasks = [tasks[i] for i in rng.permutation(len(tasks))]
        if self.shard_ is None:
            return tasks
        rank, world, remainder = self.shard_
        counts = self._matching_rows(tasks)
        ranges = share(sum(counts), rank, world, remainder)
        return [
            tasks[i] if offset == 0 and length == counts[i] else tasks[i].slice(offset, length)
            for i, offset, length in assign(counts, ranges)
        ]

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def split(self, index: int, parts: int) -> list[ReadTask]:
        """One of ``parts`` disjoint pieces of this scan's plan (e.g. a DataLoader worker's), by rows."""
        if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise FilterError(f"parts must be a positive int, got {parts!r}")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < parts:
            raise FilterError(f"index must be in [0, {parts}), got {index!r}")
        tasks = self.plan()
        counts = self.task_rows(tasks)
        ranges = share(sum(counts), index, parts, "keep")
        return [
            tasks[i] if offset == 0 and length == counts[i] else tasks[i].slice(offset, length)
            for i, offset, length in assign(counts, ranges)
        ]

    # -- reading ---------------------------------------------------------------------------------

    def _fragment(self, task: ReadTask, row_groups: Sequence[int] | None = None) -> pads.ParquetFileFragment:
        """The row groups of one file as a fragment, reusing the footer planning read when it can."""
        groups = list(row_groups) if row_groups is not None else [task.row_group]
        planned = self._store.get("fragments", {}).get(task.uri)
        if planned is not None:
            return planned.subset(row_group_ids=groups)
        return parquet_format().make_fragment(
            self._local_path(task.uri),
            filesystem=self._pa_dataset.filesystem,
            partition_expression=partition_expression(task.partition_values, self.arrow_schema),
            row_groups=groups,
        )

    def _scan_options(self) -> pads.ParquetFragmentScanOptions:
        from dal import io

        # pre-buffering whole column chunks saves round trips on object stores but doubles memory locally
        return pads.ParquetFragmentScanOptions(pre_buffer=not io.is_local(self.dataset.location))

    def _readahead(self, batch_size: int) -> tuple[int, int]:
        """(fragments, batches) pyarrow may read ahead: as many as fit READAHEAD_BUDGET decoded bytes."""
        store = self._store
        if "row_group_bytes" not in store:
            wanted = set(self.columns) if self.columns is not None else None
            sizes, rows = [], []
            for fragment in list(store.get("fragments", {}).values())[:8]:
                md = fragment.metadata
                for i in range(md.num_row_groups):
                    rg = md.row_group(i)
                    cols = [rg.column(c) for c in range(rg.num_columns)]
                    sizes.append(
                        sum(
                            c.total_uncompressed_size
                            for c in cols
                            if wanted is None or c.path_in_schema.split(".")[0] in wanted
                        )
                    )
                    rows.append(rg.num_rows)
            store["row_group_bytes"] = (max(sizes) if sizes else 0, max(rows) if rows else 1)
        rg_bytes, rg_rows = store["row_group_bytes"]
        batch_bytes = rg_bytes * min(1.0, batch_size / max(rg_rows, 1))
        fragments = int(max(1, min(4, READAHEAD_BUDGET // max(rg_bytes, 1))))
        batches = int(max(2, min(16, READAHEAD_BUDGET // max(int(batch_bytes), 1))))
        return fragments, batches

    def _mapped_pruning(self) -> tuple[pc.Expression, pa.Schema, set[str]] | None:
        """For column mapping: the filter's AND-terms on data columns with physical names, a schema naming
        data columns physically (partition columns logically, as the fragments' partition expressions
        do), and the physical names the terms need; None when no term can prune."""
        physical = self._physical
        if physical is None:
            return None
        parts = set(self.dataset.version.partition_columns)
        rename = {f.name: p.name for f, p in zip(self.arrow_schema, physical, strict=True) if f.name not in parts}
        terms = list(self.filters) + ([self._window_expr(self.window_)] if self.window_ is not None else [])
        flat: list[E.Expr] = []
        while terms:
            t = terms.pop()
            if isinstance(t, E.And):
                terms += [t.left, t.right]
            else:
                flat.append(t)
        keep = [t for t in flat if (cols := _columns_in(t)) and cols <= rename.keys()]
        if not keep:
            return None
        schema = pa.schema([f if f.name in parts else p for f, p in zip(self.arrow_schema, physical, strict=True)])
        try:
            out = _renamed(keep[0], rename)
            for t in keep[1:]:
                out = E.And(out, _renamed(t, rename))
            expr = E.to_arrow(out, schema)
        except Exception:  # pruning is an optimisation: never let it fail a read
            return None
        return expr, schema, {rename[c] for t in keep for c in _columns_in(t)}

    @property
    def _physical(self) -> pa.Schema | None:
        """The schema as the data files name it, when that differs (Delta column mapping)."""
        plans = self.dataset._plans
        if "physical" not in plans:
            ds = self.dataset
            plans["physical"] = ds._format.physical_schema(self.arrow_schema)
        physical: pa.Schema | None = plans["physical"]
        return physical

    def _read_exact(self, task: ReadTask, columns: Sequence[str] | None = None) -> pa.Table:
        """One row group with deletion vectors applied and logical column names, before the row filter
        (the given columns, else those the scan selects and filters on)."""
        if columns is None and self.columns is not None:
            columns = [*self.columns, *_filter_columns(self)]
        return read_exact(
            self._local_path(task.uri),
            self._pa_dataset.filesystem,
            task.row_group,
            self.arrow_schema,
            self._physical,
            task.partition_values,
            task.deleted,
            columns=columns,
        )

    def _exact_batches(self, task: ReadTask, batch_size: int) -> Iterator[pa.RecordBatch]:
        table = self._read_exact(task)
        flt = self.row_filter
        if flt is not None:
            table = table.filter(flt)
        if self.columns is not None:
            table = table.select(list(self.columns))
        yield from table.to_batches(max_chunksize=batch_size)

    def _read_task(self, task: ReadTask, batch_size: int) -> Iterator[pa.RecordBatch]:
        batches = (
            self._exact_batches(task, batch_size)
            if task.exact
            else self._fragment(task).to_batches(
                schema=self.arrow_schema,
                columns=list(self.columns) if self.columns is not None else None,
                filter=self.row_filter,
                batch_size=batch_size,
                use_threads=True,
                fragment_scan_options=self._scan_options(),
            )
        )
        skip, take = task.offset, task.length
        for batch in batches:
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            if skip:
                batch, skip = batch.slice(skip), 0
            if take is not None:
                if take <= 0:
                    break
                batch = batch.slice(0, take)
                take -= batch.num_rows
            if batch.num_rows:
                yield batch

    def _stream(self, tasks: Sequence[ReadTask], batch_size: int) -> Iterator[pa.RecordBatch]:
        """Runs of whole tasks go through one pyarrow scanner (its read-ahead decodes fragments in
        parallel, in order); the few tasks cut by sharding are read one by one."""
        run: list[ReadTask] = []
        for task in tasks:
            if task.offset == 0 and task.length is None and not task.exact:
                run.append(task)
                continue
            if run:
                yield from self._read_run(run, batch_size)
                run = []
            yield from self._read_task(task, batch_size)
        if run:
            yield from self._read_run(run, batch_size)

    def _read_run(self, tasks: Sequence[ReadTask], batch_size: int) -> Iterator[pa.RecordBatch]:
        # consecutive row groups of one file become one fragment (one open, one footer)
        fragments = []
        i = 0
        while i < len(tasks):
            j = i
            while (
                j + 1 < len(tasks)
                and tasks[j + 1].uri == tasks[i].uri
                and tasks[j + 1].row_group == tasks[j].row_group + 1
            ):
                j += 1
            fragments.append(self._fragment(tasks[i], [t.row_group for t in tasks[i : j + 1]]))
            i = j + 1
        dataset = pads.FileSystemDataset(fragments, self.arrow_schema, parquet_format(), self._pa_dataset.filesystem)
        fragment_ahead, batch_ahead = self._readahead(batch_size)
        for batch in dataset.to_batches(
            columns=list(self.columns) if self.columns is not None else None,
            filter=self.row_filter,
            batch_size=batch_size,
            use_threads=True,
            fragment_readahead=fragment_ahead,
            batch_readahead=batch_ahead,
            fragment_scan_options=self._scan_options(),
        ):
            if batch.num_rows:
                yield batch

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def iter_batches(
        self,
        batch_size: int = 65_536,
        *,
        num_epochs: int = 1,
        tasks: Sequence[ReadTask] | None = None,
        stream: int = 0,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of exactly ``batch_size`` rows (the last of each epoch may be shorter).

        Reads ahead on a background thread (one core decodes while another fetches). With ``num_epochs``,
        epochs run ``epoch, epoch+1, …`` (each reshuffled when shuffling). ``tasks`` reads part of the plan
        (e.g. a DataLoader worker's ``split``); ``stream`` gives that part its own shuffle-buffer RNG.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
        num_epochs = check_int(num_epochs, "num_epochs", minimum=0)
        stream = check_int(stream, "stream", minimum=0)
        from dal.dataset import _translate_missing

        for e in range(num_epochs):
            scan = self.set_epoch(self.epoch + e) if e else self
            plan = list(tasks) if tasks is not None and e == 0 else scan.plan()
            batches = _prefetch(scan._stream(plan, batch_size))
            if scan.shuffle_ is not None:
                seed, buffer = scan.shuffle_
                rank = scan.shard_[0] if scan.shard_ else 0
                batches = _shuffle_rows(batches, buffer, np.random.default_rng([seed, scan.epoch, rank, 1 + stream]))
            with _translate_missing(self.dataset):
                yield from _rebatch(batches, batch_size)

    def to_arrow(self) -> pa.Table:
        batches = list(self.iter_batches())
        if not batches:
            names = self.columns if self.columns is not None else self.arrow_schema.names
            return pa.Table.from_batches([], schema=pa.schema([self.arrow_schema.field(n) for n in names]))
        return pa.Table.from_batches(batches)

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def to_torch(self, batch_size: int = 256, **kwargs: Any) -> Any:
        """A ``torch.utils.data.IterableDataset`` of dicts of tensors (see ``dal.adapters.torch``)."""
        from dal.adapters.torch import TorchDataset

        return TorchDataset(self, batch_size, **kwargs)

    def to_tf(self, batch_size: int = 256, **kwargs: Any) -> Any:
        """A prefetching ``tf.data.Dataset`` of dicts with a full element_spec (see ``dal.adapters.tf``)."""
        from dal.adapters.tf import to_tf

        return to_tf(self, batch_size, **kwargs)

    def to_spark(self, spark: Any = None) -> Any:
        """This scan as a Spark DataFrame of the pinned version, projection and filters pushed into Spark."""
        from dal.adapters.spark import scan_to_spark

        return scan_to_spark(self, spark)

    def to_numpy(self) -> dict[str, Any]:
        """Columns as NumPy, tensor fields decoded (see ``Dataset.to_numpy``)."""
        return self.dataset._decode(self.to_arrow())

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def count(self) -> int:
        """Rows this scan yields (counts matching rows when filtered; no data columns are read)."""
        return sum(self.task_rows(self.plan()))

    def task_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        """Rows each of these tasks (of this scan's plan or a split of it) yields, counted, not read."""
        return [t.length if t.length is not None else n for t, n in zip(tasks, self._matching_rows(tasks), strict=True)]

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
        table = scan.to_arrow().sort_by([(k, "ascending") for k in keys])
        times = table.column(column)
        if max_gap is not None:
            gap = max_gap.total_seconds() if isinstance(max_gap, timedelta) else float(max_gap)
            t = times.cast(pa.int64()).to_numpy() if not pa.types.is_integer(times.type) else times.to_numpy()
            if pa.types.is_timestamp(times.type):
                t = t / {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[times.type.unit]
            breaks = np.diff(t) > gap
        else:
            breaks = np.zeros(max(table.num_rows - 1, 0), dtype=bool)
        if by is not None:
            entity = table.column(by).to_numpy(zero_copy_only=False)
            breaks |= entity[1:] != entity[:-1]
        # segment starts: row 0 and every row after a break; windows stay inside one segment
        starts = np.concatenate([[0], np.nonzero(breaks)[0] + 1]) if table.num_rows else np.array([], dtype=int)
        ends = np.concatenate([starts[1:], [table.num_rows]]) if table.num_rows else np.array([], dtype=int)
        for a, b in zip(starts, ends, strict=True):
            for i in range(int(a), int(b) - length + 1, step):
                yield table.slice(i, length)

    @translating("reading {self.dataset.name} version {self.dataset.number}")
    def bytes_planned(self) -> int:
        """Compressed bytes of the column chunks this scan reads (for measuring pruning)."""
        import pyarrow.parquet as pq

        wanted = set(self.columns) if self.columns is not None else None
        total = 0
        footers: dict[str, Any] = {}
        for t in self.plan():
            if t.uri not in footers:
                fragment = self._fragment(t)
                footers[t.uri] = pq.ParquetFile(fragment.path, filesystem=self._pa_dataset.filesystem).metadata
            rg = footers[t.uri].row_group(t.row_group)
            for c in range(rg.num_columns):
                chunk = rg.column(c)
                if wanted is None or chunk.path_in_schema.split(".")[0] in wanted:
                    total += chunk.total_compressed_size
        return total


def _columns_in(node: Any) -> set[str]:
    """The columns an expression names."""
    import dataclasses

    if isinstance(node, E.Col):
        return {node.name}
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return set().union(*(_columns_in(getattr(node, f.name)) for f in dataclasses.fields(node)))
    if isinstance(node, tuple | list):
        return set().union(*(_columns_in(item) for item in node))
    return set()


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with its column references renamed."""
    import dataclasses

    if isinstance(node, E.Col):
        return E.Col(names[node.name])
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return dataclasses.replace(
            node, **{f.name: _renamed(getattr(node, f.name), names) for f in dataclasses.fields(node) if f.init}
        )
    if isinstance(node, tuple):
        return tuple(_renamed(item, names) for item in node)
    if isinstance(node, list):
        return [_renamed(item, names) for item in node]
    return node


def _filter_columns(scan: Scan) -> list[str]:
    """The columns the scan's filters and window name."""
    import dataclasses

    names: list[str] = [scan.window_.column] if scan.window_ is not None else []

    def walk(node: Any) -> None:
        if isinstance(node, E.Col):
            names.append(node.name)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            for f in dataclasses.fields(node):
                walk(getattr(node, f.name))
        elif isinstance(node, tuple | list):
            for item in node:
                walk(item)

    for e in scan.filters:
        walk(e)
    return list(dict.fromkeys(names))


def _deleted_in(deleted: Sequence[int], start: int, rows: int) -> tuple[int, ...]:
    """The positions of ``deleted`` (sorted file positions) inside rows [start, start+rows), row-group relative."""
    import bisect

    lo, hi = bisect.bisect_left(deleted, start), bisect.bisect_left(deleted, start + rows)
    return tuple(d - start for d in deleted[lo:hi])


def _prune_time_partitions(files: list[DataFile], w: Window) -> list[DataFile]:
    """Drop files whose time partition (date=…, date=…/hour=…, or epoch seconds of the window column)
    lies wholly outside the window; files with no recognisable time partition are kept."""
    epoch_values = sorted(
        {int(v) for f in files for k, v in f.partition_values if k == w.column and v and v.lstrip("-").isdigit()}
    )
    step = min((b - a for a, b in itertools.pairwise(epoch_values)), default=None)

    def interval(f: DataFile) -> tuple[datetime, datetime] | None:
        values = dict(f.partition_values)
        for name in DATE_PARTITION_NAMES:
            v = values.get(name)
            if v:
                try:
                    day = datetime.fromisoformat(v[:10]).replace(tzinfo=UTC)
                except ValueError:
                    continue
                hour = values.get("hour")
                if hour is not None and hour.isdigit():
                    lo = day + timedelta(hours=int(hour))
                    return lo, lo + timedelta(hours=1)
                return day, day + timedelta(days=1)
        v = values.get(w.column)
        if v and v.lstrip("-").isdigit() and step:
            lo = datetime.fromtimestamp(int(v), UTC)
            return lo, lo + timedelta(seconds=step)
        return None

    kept = []
    for f in files:
        span = interval(f)
        if span is None or (span[0] < w.end and span[1] > w.start):
            kept.append(f)
    return kept


def _prefetch(source: Iterator[pa.RecordBatch], depth: int = PREFETCH_BATCHES) -> Iterator[pa.RecordBatch]:
    """Read ``source`` on a background thread, at most ``depth`` batches ahead (bounded memory)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in source:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as e:  # handed to the consumer
            q.put(e)

    thread = threading.Thread(target=produce, daemon=True, name="dal-prefetch")
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _shuffle_rows(stream: Iterator[pa.RecordBatch], buffer: int, rng: np.random.Generator) -> Iterator[pa.RecordBatch]:
    """Mix rows through a buffer of about ``buffer`` rows; emits random halves as it fills (bounded)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in stream:
        pending.append(batch)
        held += batch.num_rows
        if held >= buffer:
            table = pa.Table.from_batches(pending).combine_chunks()
            order = rng.permutation(table.num_rows)
            out, keep = order[: table.num_rows // 2], order[table.num_rows // 2 :]
            yield from table.take(pa.array(out)).to_batches()
            rest = table.take(pa.array(keep))
            pending, held = rest.to_batches(), rest.num_rows
    if pending:
        table = pa.Table.from_batches(pending)
        yield from table.take(pa.array(rng.permutation(table.num_rows))).to_batches()


def _rebatch(stream: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Exactly ``size`` rows per batch (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in stream:
        pending.append(batch)
        held += batch.num_rows
        while held >= size:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, size).combine_chunks().to_batches()[0]
            rest = table.slice(size)
            pending, held = rest.to_batches(), rest.num_rows
    if held:
        batches = pa.Table.from_batches(pending).combine_chunks().to_batches()
        if batches:
            yield batches[0]
