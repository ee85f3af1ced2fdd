"""Planning: the ReadTasks of one pinned version under a filter and window — pruning, counting, ordering.

Pure arithmetic over footers: files whose partitions the filter or window rule out are dropped, then row
groups whose statistics rule them out; shuffling permutes the tasks per (seed, epoch) and sharding cuts
the result into row ranges (``dal.read.sharding``). Without a filter or window nothing needs a footer: the plan
is one file task per file from the log's row counts (``file_tasks``), and ``expand`` gives a file task's row
groups when the file is read. A version is immutable, so everything here is cached per opened version in a
bounded ``PlanCache``.

Why one module: pruning, counting, ordering, file tasks and the plan cache are one pipeline over one pinned
version's file index and footers; each stage is a small function, and splitting them would spread one cache's
invariants over several files.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal import expr as E
from dal.errors import FilterError, FormatError
from dal.expr.walk import columns_in, conjoin, conjuncts, renamed
from dal.formats.base import DataFile
from dal.formats.footers import checked_rows
from dal.formats.fragments import dataset_from_files, footer, partition_expression, read_exact, row_group_starts
from dal.formats.index import IndexColumns
from dal.read.pinned import Pinned, QueryPlan, translate_missing
from dal.read.sharding import Remainder, assign, share
from dal.read.tasks import WHOLE_FILE, FileColumns, FileTasks, ReadTask
from dal.storage import timeparts, uris
from dal.storage.location import Location
from dal.storage.timeparts import TimePartitions

if TYPE_CHECKING:  # imported where used: pyarrow.dataset imports pandas (~0.25 s CPU of a first open)
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

_log = logging.getLogger("dal")

TableOrBatch = TypeVar("TableOrBatch", pa.Table, pa.RecordBatch)


@dataclass(frozen=True)
class Window:
    """``start <= column < end``; a None bound is open."""

    start: datetime | None
    end: datetime | None
    column: str

    def intersect(self, other: Window) -> Window:
        """Rows both windows (on the same column) keep."""
        starts = [t for t in (self.start, other.start) if t is not None]
        ends = [t for t in (self.end, other.end) if t is not None]
        return Window(max(starts) if starts else None, min(ends) if ends else None, self.column)

    def overlaps(self, lo: datetime, hi: datetime) -> bool:
        """Whether some instant of [lo, hi) is in the window."""
        return (self.end is None or lo < self.end) and (self.start is None or hi > self.start)


def as_datetime(value: datetime | date | str, what: str) -> datetime:
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


class Query:
    """The rows of a pinned version a filter and window keep, and the columns read: planning's input.

    Built by ``Scan`` (cheap; the expensive parts are cached in the version's ``PlanCache``)."""

    def __init__(
        self,
        source: Pinned,
        columns: tuple[str, ...] | None,
        filters: tuple[E.Expr, ...],
        window: Window | None,
    ) -> None:
        self.source = source
        self.columns = columns
        self.filters = filters
        self.window = window
        self.schema = source.arrow_schema()
        self.restorers  # noqa: B018 recorded types that cannot be so (dal.formats.logical) refused before any read

    @cached_property
    def restorers(self) -> Mapping[str, pa.DataType]:
        """Columns stored in another type than they were written with, and that type (``dal.formats.logical``)."""
        from dal.formats.logical import restorers

        wanted = set(self.columns) if self.columns is not None else None
        return {n: t for n, t in restorers(self.schema).items() if wanted is None or n in wanted}

    def restore(self, table: pa.Table) -> pa.Table:
        """A table as read from the files, its recorded columns back in their written types (tensors: one
        contiguous buffer per chunk, no copy per cell)."""
        from dal.formats.logical import restore

        return restore(table, self.restorers) if self.restorers else table

    @cached_property
    def store(self) -> QueryPlan:
        return self.source.plan_cache.query(self.filters, self.window)

    @cached_property
    def condition(self) -> E.Expr | None:
        """Filters and window as one bound dal expression (None: every row)."""
        exprs = list(self.filters)
        if self.window is not None:
            exprs.append(window_expr(self.window, self.schema))
        return conjoin(exprs)

    @cached_property
    def row_filter(self) -> pc.Expression | None:
        """The exact filter (what in-memory tables are filtered with)."""
        return E.to_arrow(self.condition, self.schema) if self.condition is not None else None

    @cached_property
    def _pushdown(self) -> tuple[pc.Expression | None, pc.Expression | None]:
        if self.condition is None:
            return None, None
        widened, inexact = E.pushdown(self.condition, self.schema)
        return (widened, self.row_filter) if inexact else (self.row_filter, None)

    @property
    def scan_filter(self) -> pc.Expression | None:
        """The filter handed to pyarrow's scans and row-group pruning: the exact filter, widened where
        Parquet statistics (which leave NaN out) could drop matching NaN rows (``dal.expr.pushdown``)."""
        return self._pushdown[0]

    @property
    def exact_filter(self) -> pc.Expression | None:
        """The exact filter still to apply to what a scan with ``scan_filter`` returns (None: nothing to do,
        the common case: no float comparison could lose a NaN row)."""
        return self._pushdown[1]

    def scan_columns(self) -> list[str] | None:
        """The columns a pyarrow scan reads: the projection, plus the filter's columns when the exact
        filter is applied after the scan (``refine``)."""
        if self.columns is None:
            return None
        if self.exact_filter is None:
            return list(self.columns)
        return list(dict.fromkeys([*self.columns, *self.filter_columns()]))

    def refine(self, data: TableOrBatch) -> TableOrBatch:
        """What a scan with ``scan_filter`` and ``scan_columns`` returned, exactly filtered and projected
        (in memory: no statistics are consulted there)."""
        if self.exact_filter is None:
            return data
        data = data.filter(self.exact_filter)
        return data.select(list(self.columns)) if self.columns is not None else data

    @cached_property
    def physical(self) -> pa.Schema | None:
        return self.source.physical_schema()

    @cached_property
    def files(self) -> list[DataFile]:
        """The files partitions, recorded statistics and the window's time partitions do not rule out, before any
        is opened: with a ``FileIndex`` (Delta's log), the bounds of every file are weighed at once
        (``dal.expr.stats.may_match``) and only the survivors become ``DataFile`` objects."""
        index = self.source.file_index()
        if index is None:
            files = self.source.files()
        elif self.condition is None:
            files = index.data_files()
        else:
            schema = self.schema
            keep = E.may_match(self.condition, schema, lambda c: index.bounds(c, schema), len(index))
            files = index.data_files(np.flatnonzero(keep))
        if self.window is not None:
            files = prune_time_partitions(files, self.window, self.time_rule)
        return files

    @cached_property
    def total_files(self) -> int:
        """How many files the version has (before any pruning)."""
        index = self.source.file_index()
        return len(index) if index is not None else len(self.source.files())

    @cached_property
    def location(self) -> Location:
        """The version's root, resolved once: file paths below it are joined as strings (no per-file resolve)."""
        return Location.of(self.source.location, self.source.storage_options)

    @cached_property
    def time_rule(self) -> TimePartitions | None:
        """How the version's time partitions derive from the window's column, when dal knows (else None)."""
        if self.window is None:
            return None
        version = self.source.version
        rule = timeparts.rule_of(version.properties, self.source.info.properties)
        return rule if timeparts.prunable(rule, self.window.column, version.partition_columns) else None

    @property
    def pa_dataset(self) -> pads.FileSystemDataset:
        """The version's files as a pyarrow dataset, made afresh in a forked process (a DataLoader worker):
        pyarrow's S3 client is not fork-safe, and a child using the parent's pooled connections reads
        another request's bytes ("Couldn't deserialize thrift")."""
        held = self.__dict__.get("_pa_dataset")
        if held is None or held[0] != os.getpid():
            src = self.source
            dataset = dataset_from_files(self.files, self.schema, src.location, src.storage_options, self.local_path)
            held = (os.getpid(), dataset)
            self.__dict__["_pa_dataset"] = held
        return held[1]

    @property
    def filesystem(self) -> Any:
        """The version's pyarrow filesystem (the dataset's once made), made afresh in a forked process as
        ``pa_dataset`` is; a read of a few files needs no fragment for every file of the version."""
        held = self.__dict__.get("_pa_dataset")
        if held is not None and held[0] == os.getpid():
            return held[1].filesystem
        fs = self.__dict__.get("_filesystem")
        if fs is None or fs[0] != os.getpid():
            fs = (os.getpid(), uris.filesystem(self.source.location, self.source.storage_options)[0])
            self.__dict__["_filesystem"] = fs
        return fs[1]

    def local_path(self, uri: str) -> str:
        """``uri``'s path inside the version's filesystem."""
        return self.location.path_of(uri)

    def filter_columns(self) -> list[str]:
        """The columns the filters and window name."""
        names: list[str] = [self.window.column] if self.window is not None else []
        for e in self.filters:
            names += columns_in(e, ordered=True)
        return list(dict.fromkeys(names))

    # -- tasks ------------------------------------------------------------------------------------

    def all_tasks(self) -> list[ReadTask]:
        """Every row group that partitions and statistics do not rule out, in a deterministic order.

        Cached per (filters, window): the pinned version never changes, so the footers are read once
        however many scans and epochs follow."""
        store = self.store
        if store.tasks is None:
            with translate_missing(self.source):  # planning reads footers: a vacuumed file fails here
                store.tasks = self._plan_tasks(store)
        return list(store.tasks)

    def _plan_tasks(self, store: QueryPlan) -> list[ReadTask]:
        flt = self.scan_filter  # pruning only: sound (widened where statistics would lose NaN rows)
        mapped = self.physical is not None
        pruning = self.mapped_pruning() if mapped and flt is not None else None
        tasks = []
        kept_files = groups = 0
        uri_of = {f.uri: f for f in self.files}
        paths = {self.local_path(u): u for u in uri_of}
        for fragment in self.pa_dataset.get_fragments(filter=flt if flt is not None else pc.scalar(True)):
            uri = paths.get(fragment.path, fragment.path)
            store.fragments[uri] = fragment  # keeps its footer once split_by_row_group has read it
            values = uri_of[uri].partition_values if uri in uri_of else ()
            deleted = uri_of[uri].deleted_rows if uri in uri_of else ()
            pieces = self._row_groups_kept(fragment, flt, pruning)
            self._check_row_count(uri, fragment.metadata, uri_of[uri].row_count if uri in uri_of else None)
            kept_files, groups = kept_files + 1, groups + fragment.num_row_groups
            starts = row_group_starts(fragment.path, fragment.filesystem) if deleted else []
            for piece in pieces:
                for rg in piece.row_groups:
                    gone = deleted_in(deleted, starts[rg.id], rg.num_rows) if deleted else ()
                    exact = mapped or bool(deleted)
                    tasks.append(ReadTask(uri, rg.id, values, rg.num_rows, deleted=gone, exact=exact))
        tasks.sort(key=lambda t: (t.uri, t.row_group))
        store.pruning = (self.total_files, kept_files, groups, len(tasks))
        _log.debug(
            "%s version %d: pruned %d of %d files, then %d of %d row groups",
            self.source.name,
            self.source.number,
            self.total_files - kept_files,
            self.total_files,
            groups - len(tasks),
            groups,
        )
        return tasks

    def file_tasks(self) -> Sequence[ReadTask]:
        """Without a filter or window: one file task per file (``ReadTask.whole_file``), its rows the count the
        log or record gives, in ``all_tasks``' order, no footer read; a file whose count is unknown is planned by
        its footer (its row groups). With a filter or window: ``all_tasks()``.

        With a file index (Delta's log) and every count known, the tasks are ``FileTasks``: the log's columns,
        sorted by an index array, a ``ReadTask`` made only for a task indexed or iterated (a rank's share).
        The counts are checked against the footers when ``expand`` reads them (a FormatError where they
        differ), so a plan costs the log, and a read opens only the files it reads."""
        if self.condition is not None:
            return self.all_tasks()
        store = self.store
        if store.file_tasks is None:
            store.file_tasks = self._file_tasks()
            if store.pruning is None:  # no filter: no row group is pruned (the counts stay unknown until read)
                store.pruning = (self.total_files, self.total_files, 0, 0)
        held = store.file_tasks
        return held if isinstance(held, FileTasks) else list(held)  # FileTasks: immutable, shared

    def _file_tasks(self) -> Sequence[ReadTask]:
        exact = self.physical is not None
        index = self.source.file_index()
        if index is not None:  # columns of the log: no object per file
            columns = index.columns()
            if columns.counts is not None:
                return _columns(columns, index.deleted, exact)
            located, _, counts, values, deleted = index.listing()
            listed = zip(located, counts, values, deleted, strict=True)
        else:
            listed = zip(*_data_file_columns(self.files), strict=True)
        tasks: list[ReadTask] = []
        with translate_missing(self.source):
            for uri, rows, parts, gone in listed:
                if rows is None:  # no recorded count: its footer, now
                    tasks.extend(self._file_groups(uri, parts, gone, None))
                else:
                    tasks.append(ReadTask(uri, WHOLE_FILE, parts, rows, deleted=gone, exact=exact or bool(gone)))
        tasks.sort(key=attrgetter("uri", "row_group"))
        return tasks

    def expand(self, tasks: Sequence[ReadTask]) -> list[ReadTask]:
        """``tasks`` with each file task replaced by the row-group tasks holding its rows (its footer read once,
        its row count checked against it); the rows, their order and the cut are those of ``all_tasks`` cut
        the same way.

        Raises:
            FormatError: a file's footer disagrees with the count the version records for it.
        """
        out: list[ReadTask] = []
        for t in tasks:
            if not t.whole_file:
                out.append(t)
                continue
            groups = self.store.expanded.get(t.uri)
            if groups is None:
                with translate_missing(self.source):
                    groups = self._file_groups(t.uri, t.partition_values, t.deleted, t.num_rows)
                self.store.expanded[t.uri] = groups
            if t.offset == 0 and t.length is None:
                out.extend(groups)
                continue
            counts = [g.live_rows for g in groups]
            length = t.length if t.length is not None else sum(counts) - t.offset
            out.extend(cut(groups, counts, [(t.offset, length)]) if length > 0 else [])
        return out

    def _file_groups(
        self, uri: str, values: tuple[tuple[str, str | None], ...], deleted: tuple[int, ...], claimed: int | None
    ) -> list[ReadTask]:
        """One file's row groups as tasks, from its footer (checked against ``claimed``): what ``_plan_tasks``
        makes of a file when there is no filter."""
        fragment = self._file_fragment(uri, values)
        pieces = list(fragment.split_by_row_group(schema=self.schema))
        self._check_row_count(uri, fragment.metadata, claimed)
        starts: list[int] = []
        if deleted:
            md, at = fragment.metadata, 0
            for i in range(md.num_row_groups):
                starts.append(at)
                at += md.row_group(i).num_rows
        exact = self.physical is not None or bool(deleted)
        out = []
        for piece in pieces:
            for rg in piece.row_groups:
                gone = deleted_in(deleted, starts[rg.id], rg.num_rows) if deleted else ()
                out.append(ReadTask(uri, rg.id, values, rg.num_rows, deleted=gone, exact=exact))
        return out

    @cached_property
    def _sizes(self) -> dict[str, int]:
        """Each file's size (from the log: spares a HEAD request per file on object stores)."""
        index = self.source.file_index()
        if index is None or "files" in self.__dict__:
            return {f.uri: f.size_bytes for f in self.files if f.size_bytes}
        located, sizes, *_ = index.listing()  # no object per file where none was made
        return {u: n for u, n in zip(located, sizes, strict=True) if n}

    def _file_fragment(self, uri: str, values: tuple[tuple[str, str | None], ...]) -> pads.ParquetFileFragment:
        """The whole file as a fragment, made once per process (its footer read once, then kept)."""
        from dal.formats.fragments import parquet_format

        store = self.store
        if store.pid != os.getpid():  # a forked worker: its own fragments (no parent's client), footers read once
            store.fragments, store.pid = {}, os.getpid()
        planned = store.fragments.get(uri)
        if planned is None:
            planned = parquet_format().make_fragment(
                self.local_path(uri),
                filesystem=self.filesystem,
                partition_expression=partition_expression(values, self.schema),
                file_size=self._sizes.get(uri),  # from the log: spares a HEAD request on object stores
            )
            store.fragments[uri] = planned
        return planned

    def _row_groups_kept(
        self,
        fragment: pads.ParquetFileFragment,
        flt: pc.Expression | None,
        pruning: tuple[pc.Expression, pa.Schema, set[str]] | None,
    ) -> list[pads.ParquetFileFragment]:
        """The file's row groups the filter's statistics do not rule out (``pruning``: column mapping's)."""
        if flt is not None and self.physical is None:
            return list(fragment.split_by_row_group(filter=flt, schema=self.schema))
        if pruning is not None and pruning[2] <= set(fragment.physical_schema.names):
            # column mapping: statistics carry the physical names, so prune by the data-column
            # terms of the filter renamed to them (only where the file has every one of them)
            return list(fragment.split_by_row_group(filter=pruning[0], schema=pruning[1]))
        return list(fragment.split_by_row_group(schema=self.schema))

    def _check_row_count(self, uri: str, metadata: pq.FileMetaData, claimed: int | None) -> None:
        """The footer's rows (``metadata``: read by ``split_by_row_group``) against the count the version's log or
        record claims (what the catalog's ``count()`` came from): a FormatError when they differ."""
        rows = checked_rows(metadata, uris.mask_url(uri))
        if claimed is not None and claimed != rows:
            raise FormatError(
                f"{self.source.name} version {self.source.number}: {uris.mask_url(uri)} holds {rows:,} rows "
                f"by its Parquet footer but the version says {claimed:,}: dal will not read a version whose "
                "row count it cannot return"
            )

    def fragment(self, task: ReadTask, row_groups: Sequence[int] | None = None) -> pads.ParquetFileFragment:
        """The row groups of one file as a fragment, reusing the footer planning read when it can (a file task:
        the whole file)."""
        planned = self._file_fragment(task.uri, task.partition_values)
        if task.whole_file and row_groups is None:
            return planned
        groups = list(row_groups) if row_groups is not None else [task.row_group]
        # pyarrow 26's make_fragment(row_groups=[7, 8, 9]) reads 8, 9, 7: subset keeps the order
        return planned.subset(row_group_ids=groups)

    def read_exact(self, task: ReadTask, columns: Sequence[str] | None = None) -> pa.Table:
        """One row group with deletion vectors applied and logical column names, before the row filter
        (the given columns, else those selected and filtered on)."""
        if columns is None and self.columns is not None:
            columns = [*self.columns, *self.filter_columns()]
        return read_exact(
            self.local_path(task.uri),
            self.filesystem,
            task.row_group,
            self.schema,
            self.physical,
            task.partition_values,
            task.deleted,
            columns=columns,
        )

    def read_file(self, task: ReadTask, rows: int, max_bytes: int) -> list[pa.Table] | None:
        """The first ``rows`` rows of a file task without a filter (all of them when it holds fewer), row group by
        row group, each through ``read_exact`` (its footer and row groups by ``pyarrow.parquet``: no fragment, no
        ``pyarrow.dataset`` and its pandas import), projected and restored as ``read_task`` returns them, its
        footer's count checked first; None when a row group they need holds more than ``max_bytes`` (uncompressed):
        a scan reads a slice of such a group, this would read it whole.

        Raises:
            FormatError: the file is gone, or its footer disagrees with the task's count."""
        if not task.whole_file or self.condition is not None:
            raise ValueError("read_file takes a file task of a scan without a filter")
        out: list[pa.Table] = []
        with translate_missing(self.source):
            md = footer(self.local_path(task.uri), self.filesystem)
            self._check_row_count(task.uri, md, task.num_rows)
            at = 0
            for i in range(md.num_row_groups):
                if rows <= 0:
                    break
                group = md.row_group(i)
                if group.total_byte_size > max_bytes:
                    return None
                gone = deleted_in(task.deleted, at, group.num_rows) if task.deleted else ()
                at += group.num_rows
                table = self.read_exact(ReadTask(task.uri, i, task.partition_values, group.num_rows, deleted=gone,
                                                 exact=True))  # fmt: skip
                table = (table.select(list(self.columns)) if self.columns is not None else table).slice(0, rows)
                rows -= table.num_rows
                out.append(self.restore(table))  # what is shown only: a tensor column's cells restored
        return out

    def matching_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        """Rows per task that pass the filter (a read of the filter columns only when there is a filter)."""
        flt = self.row_filter
        if flt is None:
            return [t.live_rows for t in tasks]
        counted = self.store.matching
        for t in tasks:
            if (t.uri, t.row_group) not in counted and t.exact:  # deletion vectors, column mapping
                counted[(t.uri, t.row_group)] = self.read_exact(t, self.filter_columns()).filter(flt).num_rows
            if (t.uri, t.row_group) not in counted:
                # a scan over the dataset's schema: the filter may name partition columns, which the file
                # lacks and the fragment's partition expression supplies. Not count_rows(): when the filter
                # holds for the whole partition, pyarrow 26 counts every row group of the file, not this one.
                exact = self.exact_filter
                import pyarrow.dataset as pads

                scanner = pads.Scanner.from_fragment(
                    self.fragment(t),
                    schema=self.schema,
                    filter=self.scan_filter,
                    columns=[] if exact is None else self.filter_columns(),
                )
                if exact is None:
                    counted[(t.uri, t.row_group)] = sum(b.num_rows for b in scanner.to_batches())
                else:  # the scan's filter is widened: count what the exact one keeps of its rows
                    counted[(t.uri, t.row_group)] = sum(b.filter(exact).num_rows for b in scanner.to_batches())
        return [counted[(t.uri, t.row_group)] for t in tasks]

    def task_rows(self, tasks: Sequence[ReadTask]) -> list[int]:
        """Rows each task yields (its slice's length, else its matching rows), counted, not read."""
        rows = self.task_counts(tasks)
        return rows.tolist() if isinstance(rows, np.ndarray) else rows  # type: ignore[no-any-return]

    def task_counts(self, tasks: Sequence[ReadTask]) -> Any:
        """``task_rows``, an int64 array of ``FileTasks`` without a filter (no object per task)."""
        if isinstance(tasks, FileTasks) and self.row_filter is None:
            return tasks.task_rows()
        return [t.length if t.length is not None else n for t, n in zip(tasks, self.matching_rows(tasks), strict=True)]

    def ordered(self, shuffle: tuple[int, int] | None, epoch: int) -> list[ReadTask]:
        """Every task in this epoch's order: a seeded permutation of row groups when shuffling."""
        tasks = self.all_tasks()
        if shuffle is not None:
            rng = np.random.default_rng([shuffle[0], epoch])
            tasks = [tasks[i] for i in rng.permutation(len(tasks))]
        return tasks

    def shard(self, tasks: Sequence[ReadTask], rank: int, world: int, remainder: Remainder) -> Sequence[ReadTask]:
        """``rank``'s share of ``tasks`` by rows (see ``dal.read.sharding``); of ``FileTasks``, a view of them."""
        with translate_missing(self.source):
            counts = self.task_counts(tasks)
        return cut(tasks, counts, share(total(counts), rank, world, remainder))

    def row_group_bytes(self) -> tuple[int, int]:
        """(decoded bytes of the projection in the largest row group, rows of the largest row group), from
        the footers of the first files planned: sizes read-ahead and chunks."""
        store = self.store
        key = tuple(sorted(self.columns)) if self.columns is not None else None  # each projection its own size
        if key not in store.row_group_bytes:
            wanted = set(self.columns) if self.columns is not None else None
            sizes, rows = [], []
            for fragment in list(store.fragments.values())[:8]:
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
            store.row_group_bytes[key] = (max(sizes) if sizes else 0, max(rows) if rows else 1)
        return store.row_group_bytes[key]

    def mapped_pruning(self) -> tuple[pc.Expression, pa.Schema, set[str]] | None:
        """For column mapping: the filter's AND-terms on data columns with physical names, a schema naming
        data columns physically (partition columns logically, as the fragments' partition expressions
        do), and the physical names the terms need; None when no term can prune."""
        physical = self.physical
        if physical is None:
            return None
        parts = set(self.source.version.partition_columns)
        rename = {f.name: p.name for f, p in zip(self.schema, physical, strict=True) if f.name not in parts}
        terms = list(self.filters) + ([window_expr(self.window, self.schema)] if self.window is not None else [])
        flat = [c for t in terms for c in conjuncts(t)]
        keep = [t for t in flat if (cols := set(columns_in(t))) and cols <= rename.keys()]
        if not keep:
            return None
        schema = pa.schema([f if f.name in parts else p for f, p in zip(self.schema, physical, strict=True)])
        try:
            out = conjoin([renamed(t, rename) for t in keep])
            assert out is not None
            expr = E.pushdown(out, schema)[0]  # pruning only: widened where statistics would lose NaN rows
        except Exception:  # pruning is an optimisation: never let it fail a read
            return None
        return expr, schema, {rename[c] for t in keep for c in columns_in(t)}


def cut(
    tasks: Sequence[ReadTask], counts: Sequence[int] | np.ndarray, ranges: Sequence[tuple[int, int]]
) -> Sequence[ReadTask]:
    """The tasks (whole or sliced) that hold the global row ``ranges`` of ``tasks`` (``counts`` rows each):
    a list, or of ``FileTasks`` a view of them (no object per task)."""
    if isinstance(tasks, FileTasks):
        return tasks.cut(np.asarray(counts, dtype=np.int64), ranges)
    counts = list(counts) if isinstance(counts, np.ndarray) else counts
    return [
        tasks[i] if offset == 0 and length == counts[i] else tasks[i].slice(offset, length)
        for i, offset, length in assign(counts, ranges)
    ]


def total(counts: Sequence[int] | np.ndarray) -> int:
    """The sum of ``task_counts`` (an array's in one call)."""
    return int(counts.sum()) if isinstance(counts, np.ndarray) else sum(counts)


def _columns(columns: IndexColumns, deleted: Mapping[str, tuple[int, ...]], exact: bool) -> FileTasks:
    """The file tasks of an index whose every count is known, in ``all_tasks``' order (by URI: the index's
    order of paths where '/' separates a URI's parts, else sorted through an index array)."""
    assert columns.counts is not None
    c = FileColumns(
        columns.paths, columns.prefix, columns.sep, columns.counts, columns.parts, columns.part_of, deleted, exact
    )
    at = None
    if c.sep != "/":
        located = [c.uri(p) for p in c.paths.to_pylist()]
        order = np.array(sorted(range(len(located)), key=located.__getitem__), dtype=np.intp)
        at = None if bool((order == np.arange(len(order))).all()) else order
    return FileTasks(c, at)


def _data_file_columns(
    files: list[DataFile],
) -> tuple[list[str], list[int | None], list[tuple[tuple[str, str | None], ...]], list[tuple[int, ...]]]:
    return (
        [f.uri for f in files],
        [f.row_count for f in files],
        [f.partition_values for f in files],
        [f.deleted_rows for f in files],
    )


def window_expr(w: Window, schema: pa.Schema) -> E.Expr:
    """``start <= column < end`` bound to ``schema`` (epoch-second integers compared exactly; a None bound is
    open; an empty intersection of windows keeps no row)."""
    typ = schema.field(w.column).type

    def bound(t: datetime) -> Any:
        return _epoch_seconds(t) if pa.types.is_integer(typ) else t  # epoch seconds, compared exactly

    terms: list[E.Expr] = []
    if w.start is not None:
        terms.append(E.Col(w.column) >= bound(w.start))
    if w.end is not None:
        terms.append(E.Col(w.column) < bound(w.end))
    out = conjoin(terms)
    assert out is not None  # a Window has a start or an end
    return E.bind(out, schema)


def deleted_in(deleted: Sequence[int], start: int, rows: int) -> tuple[int, ...]:
    """The positions of ``deleted`` (sorted file positions) inside rows [start, start+rows), row-group relative."""
    lo, hi = bisect.bisect_left(deleted, start), bisect.bisect_left(deleted, start + rows)
    return tuple(d - start for d in deleted[lo:hi])


def prune_time_partitions(files: list[DataFile], w: Window, rule: TimePartitions | None) -> list[DataFile]:
    """Drop files whose time partition (``rule``: how ``date=…`` / ``hour=…`` derive from the window's column,
    see ``dal.storage.timeparts``) lies wholly outside the window. Without a rule nothing is dropped here: the window
    is a filter, pushed down to partition values (a window on a partition column itself prunes exactly) and
    row-group statistics."""
    if rule is None:
        return files
    kept = []
    for f in files:
        span = rule.interval(dict(f.partition_values))
        if span is None or w.overlaps(*span):
            kept.append(f)
    return kept
