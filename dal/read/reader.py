"""Reading: planned ReadTasks -> large Arrow chunks (read ahead on threads, optionally permuted) -> batches.

A chunk is a run of consecutive tasks (whole row groups, or the row ranges sharding cut) holding at
least ``chunk_rows`` rows, sized from the footers and independent of the batch size. Tasks are read on
a small thread pool (pyarrow releases the GIL), in order, as far ahead as ``READAHEAD_BUDGET`` decoded
bytes allow. Shuffling permutes the rows inside each chunk with a generator seeded by (seed, epoch,
the chunk's first task): one gather per chunk, no per-row buffer, the same order on every run.
"""

from __future__ import annotations

import bisect
import concurrent.futures as cf
import functools
import math
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from dal.errors import FormatError
from dal.formats.fragments import parquet_format
from dal.read.pinned import translate_missing
from dal.read.plan import Query
from dal.read.prefetch import prefetch as prefetch  # reader.prefetch: the sampled path and torch use it
from dal.read.tasks import ReadTask

if TYPE_CHECKING:  # imported where used: pyarrow.dataset imports pandas (~0.25 s CPU of a first open)
    import pyarrow.dataset as pads

# decoded bytes pyarrow may hold ahead of the consumer; sizes its read-ahead so memory stays bounded
# whatever the row-group size of the data (measured: benchmarks/reader_bench.py, peak RSS rows)
READAHEAD_BUDGET = 128 * 1024 * 1024
CHUNK_BYTES = 2 * 1024 * 1024  # decoded bytes a chunk aims for: tens of thousands of rows of a few columns
# a floor that only matters for rows wider than CHUNK_BYTES / MIN_CHUNK_ROWS (8 KiB): tabular rows reach
# tens of thousands of rows by bytes alone, while image and tensor rows stay near CHUNK_BYTES (a floor of
# 16,384 rows made 20,000 PNGs decoded before the first batch)
MIN_CHUNK_ROWS, MAX_CHUNK_ROWS = 256, 1 << 20
READ_THREADS = 4
CHUNKS_AHEAD = 2  # chunks read ahead of the consumer (each chunk's row groups are decoded in parallel)
PREFETCH_CHUNKS = 1  # converted chunks queued for the consumer (the pool already reads ahead)
FINISH_THREADS = 2  # chunks permuted, gathered and converted at once (after the scan, before the consumer)
_ON_CALLER: list[bool] = []  # set once in a DataLoader worker process: see read_on_caller


def read_on_caller() -> None:
    """From now on this process reads chunks on the calling thread: no prefetch thread, no finish pool
    (pyarrow still decodes on its own threads). For a plain DataLoader worker process, whose workers already
    overlap each other and the main process. dal's threads there cost CPU (GIL hand-offs with the worker's
    queue feeder thread on few cores): 258 -> 224 ns per row for the whole process tree of a plain
    ``DataLoader(num_workers=2)`` without them (docs/BENCHMARKS.md); ``loader()``'s workers read this way too."""
    if not _ON_CALLER:
        _ON_CALLER.append(True)


def on_caller() -> bool:
    """Whether ``read_on_caller`` was called in this process."""
    return bool(_ON_CALLER)


T = TypeVar("T")


def _files_dataset(fragments: list[pads.ParquetFileFragment], query: Query) -> pads.FileSystemDataset:
    import pyarrow.dataset as pads

    return pads.FileSystemDataset(fragments, query.schema, parquet_format(), query.filesystem)


def scan_options(query: Query) -> pads.ParquetFragmentScanOptions:
    import pyarrow.dataset as pads

    from dal.storage import uris

    # pre-buffering whole column chunks saves round trips on object stores but doubles memory locally
    return pads.ParquetFragmentScanOptions(pre_buffer=not uris.is_local(query.source.location))


def row_bytes(query: Query) -> float:
    """Bytes a row of the projection takes once read and decoded: its Parquet (uncompressed) size from the
    footers, plus the decoded size of its tensor fields of fixed shape (a PNG or a compressed ndarray
    decodes to ``itemsize * prod(shape)`` bytes, held beside its encoded bytes while a chunk converts)."""
    rg_bytes, rg_rows = query.row_group_bytes()
    per_row = rg_bytes / max(rg_rows, 1)
    wanted = set(query.columns) if query.columns is not None else None
    for f in query.source.schema:
        if (wanted is not None and f.name not in wanted) or f.codec in (None, "scalar") or not f.dtype:
            continue
        shape = f.shape or ()
        if all(d is not None for d in shape):
            per_row += np.dtype(f.dtype).itemsize * math.prod(d for d in shape if d is not None)
    return max(per_row, 1.0)


def chunk_rows(query: Query, minimum: int = 0) -> int:
    """Rows a chunk aims for: CHUNK_BYTES of the projection's decoded size (``row_bytes``), within
    [MIN_CHUNK_ROWS, MAX_CHUNK_ROWS], at least ``minimum``. A chunk is made of whole row groups (or the
    ranges sharding cut), so one holds at least a row group."""
    per_row = row_bytes(query)
    return max(minimum, int(min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, CHUNK_BYTES // per_row))))


def groups(tasks: Sequence[ReadTask], counts: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Consecutive task ranges ``[(start, end)]`` of at least ``target`` rows each (the last may hold fewer)."""
    out, start, held = [], 0, 0
    for i, n in enumerate(counts):
        held += n
        if held >= target:
            out.append((start, i + 1))
            start, held = i + 1, 0
    if start < len(tasks):
        out.append((start, len(tasks)))
    return out


def read_task(query: Query, task: ReadTask) -> pa.Table:
    """The rows of one task: filtered, projected, deletion vectors applied, cut to its row range."""
    columns = list(query.columns) if query.columns is not None else None
    if task.exact:
        table = query.read_exact(task)
        if query.row_filter is not None:
            table = table.filter(query.row_filter)
        if columns is not None:
            table = table.select(columns)
    else:
        table = query.fragment(task).to_table(
            schema=query.schema,
            columns=query.scan_columns(),
            filter=query.scan_filter,
            use_threads=True,
            fragment_scan_options=scan_options(query),
        )
        table = query.refine(table)  # the exact filter, where the scan's was widened (before slicing)
    if task.offset or task.length is not None:
        table = table.slice(task.offset, task.length)
    return query.restore(table)


def read_span(query: Query, tasks: Sequence[ReadTask]) -> pa.Table:
    """The rows of consecutive tasks as one table. Whole row groups go through ONE pyarrow scan (one
    fragment per run of consecutive row groups of a file; pyarrow decodes them in parallel, in order);
    tasks cut by sharding or read exactly (deletion vectors, column mapping) are read one by one."""
    if not tasks:
        raise ValueError("read_span needs at least one task")
    if any(t.offset or t.length is not None or t.exact for t in tasks) or len(tasks) == 1:
        pieces = [read_task(query, t) for t in tasks]
        return pa.concat_tables(pieces).combine_chunks() if len(pieces) > 1 else pieces[0].combine_chunks()
    fragments = []
    i = 0
    while i < len(tasks):
        j = i
        while (
            j + 1 < len(tasks) and tasks[j + 1].uri == tasks[i].uri and tasks[j + 1].row_group == tasks[j].row_group + 1
        ):
            j += 1
        fragments.append(query.fragment(tasks[i], [t.row_group for t in tasks[i : j + 1]]))
        i = j + 1
    dataset = _files_dataset(fragments, query)
    table = dataset.to_table(
        columns=query.scan_columns(),
        filter=query.scan_filter,
        use_threads=True,
        fragment_scan_options=scan_options(query),
    )
    return query.restore(query.refine(table).combine_chunks())


def ordered_map(fn: Callable[[int], T], n: int, ahead: int) -> Iterator[T]:
    """``fn(0), fn(1), …, fn(n-1)`` computed on a thread pool at most ``ahead`` calls in advance, in order."""
    if n == 0:
        return
    with cf.ThreadPoolExecutor(max_workers=min(READ_THREADS, ahead), thread_name_prefix="dal-read") as pool:
        pending: deque[cf.Future[T]] = deque()
        submitted = 0
        try:
            while submitted < n or pending:
                while submitted < n and len(pending) < ahead:
                    pending.append(pool.submit(fn, submitted))
                    submitted += 1
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


def chunk_seed(task: ReadTask, seed: int, epoch: int) -> list[int]:
    """The seed of the row permutation of the chunk that starts with ``task``: a pure function of the
    shuffle seed, the epoch and the task (file, row group, first row), so every run agrees."""
    return [seed, epoch, zlib.crc32(task.uri.encode()), task.row_group, task.offset]


def combine(pieces: Sequence[pa.Table], first: ReadTask, permute: tuple[int, int] | None) -> pa.Table:
    """The tables of one chunk's tasks as one table (one buffer per column), rows permuted when shuffling."""
    table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    if permute is not None and table.num_rows > 1:
        rng = np.random.default_rng(chunk_seed(first, *permute))
        table = table.take(pa.array(rng.permutation(table.num_rows)))  # gathers across the pieces: one chunk out
    return table.combine_chunks()


def read_chunks(
    query: Query,
    tasks: Sequence[ReadTask],
    spans: Sequence[tuple[int, int]],
    *,
    permute: tuple[int, int] | None = None,
    skip: int = 0,
    convert: Callable[[pa.Table], T] | None = None,
) -> Iterator[tuple[int, Any]]:
    """The chunks of ``tasks`` (``spans`` of task indices from ``groups``), in order, as ``(k, chunk)``: k
    the span it came from. Each is one table (one contiguous buffer per column), rows permuted by
    ``(seed, epoch)`` when given, the first ``skip`` rows of the first span dropped (resumption), then
    ``convert`` applied — all off the caller's thread (``convert`` may run on two threads at once, on
    different chunks). A span of more than twice ``chunk_rows`` (one row group of images or tensors holds
    many chunks' decoded bytes) comes as consecutive slices of ``chunk_rows``, each converted on its own:
    the first batch waits for one slice's decoding, not the row group's, and decoded memory stays
    proportional to the chunk, not to the row group."""
    target = chunk_rows(query)

    def arrange(k: int, table: pa.Table) -> pa.Table:
        table = combine([table], tasks[spans[k][0]], permute)
        return table.slice(skip) if k == 0 and skip else table

    def finish(table: pa.Table) -> Any:
        return convert(table) if convert is not None else table

    def jobs() -> Iterator[tuple[int, Callable[[], Any]]]:
        for k, table in enumerate(stream_spans(query, tasks, spans, None if permute is not None else target)):
            if not isinstance(table, pa.Table):  # a wide row group read a slice of pages at a time
                dropped = skip if k == 0 else 0
                for piece in table:
                    if dropped >= piece.num_rows:
                        dropped -= piece.num_rows
                        continue
                    yield k, functools.partial(finish, piece.slice(dropped))
                    dropped = 0
                continue
            check_rows(query, tasks[spans[k][0] : spans[k][1]], table)
            if table.num_rows <= 2 * target:
                yield k, functools.partial(lambda k, table: finish(arrange(k, table)), k, table)
                continue
            whole = arrange(k, table)  # the permutation is the row group's: slices of it keep the order
            for a in range(0, whole.num_rows, target):
                yield k, functools.partial(finish, whole.slice(a, target))

    def tables() -> Iterator[tuple[int, Any]]:
        if FINISH_THREADS <= 1 or _ON_CALLER:
            for k, job in jobs():
                yield k, job()
            return
        # the scanner's tables arrive in order on this thread; the permutation, the gather and ``convert``
        # (decoding tensor fields) run on FINISH_THREADS (NumPy's shuffle, Arrow's take and the codecs
        # release the GIL), so they overlap each other and the scan
        with cf.ThreadPoolExecutor(max_workers=FINISH_THREADS, thread_name_prefix="dal-finish") as pool:
            pending: deque[tuple[int, cf.Future[Any]]] = deque()
            try:
                for k, job in jobs():
                    pending.append((k, pool.submit(job)))
                    if len(pending) >= FINISH_THREADS:
                        done, future = pending.popleft()
                        yield done, future.result()
                while pending:
                    done, future = pending.popleft()
                    yield done, future.result()
            finally:
                for _, f in pending:
                    f.cancel()

    with translate_missing(query.source):
        yield from tables() if _ON_CALLER else prefetch(tables(), PREFETCH_CHUNKS)


def check_rows(query: Query, tasks: Sequence[ReadTask], table: pa.Table) -> None:
    """Unfiltered whole row groups decode to the rows their footers claim: ``count()``, sharding and
    resumption take those counts as true, so a footer that lies consistently (every count in it agreeing,
    the file's pages holding fewer or more rows) is a ``FormatError`` naming the files, not a count that
    differs from the rows read."""
    if query.condition is not None or not tasks or not all(_simple(t) for t in tasks):
        return
    claimed = sum(t.num_rows for t in tasks)
    if table.num_rows == claimed:
        return
    # which row group: read one by one (only here, on the way to the error)
    for t in tasks if len(tasks) > 1 else ():
        held = read_task(query, t).num_rows
        if held != t.num_rows:
            claimed, table, tasks = t.num_rows, read_task(query, t), [t]
            break
    raise _lying_footer(query, tasks, claimed, table.num_rows)


def _lying_footer(query: Query, tasks: Sequence[ReadTask], claimed: int, held: int) -> FormatError:
    where = tasks[0].uri.rsplit("/", 1)[-1] + (f", row group {tasks[0].row_group}" if len(tasks) == 1 else " …")
    return FormatError(
        f"{query.source.name}: {where}: the Parquet footer says {claimed:,} rows but the pages hold {held:,} "
        "(a damaged or rewritten file)"
    )


def _simple(task: ReadTask) -> bool:
    return not (task.offset or task.length is not None or task.exact)


def stream_spans(
    query: Query, tasks: Sequence[ReadTask], spans: Sequence[tuple[int, int]], slice_rows: int | None = None
) -> Iterator[pa.Table | Iterator[pa.Table]]:
    """One table per span, in order. Runs of spans of whole row groups stream through ONE pyarrow scanner
    (its read-ahead decodes fragments in parallel, in order, within READAHEAD_BUDGET); spans holding
    tasks cut by sharding or read exactly are read by ``read_span``. With ``slice_rows``, a span of one
    row group of more than twice that many rows that ``pages_stream`` can read comes as an iterator of
    tables of ``slice_rows`` rows (its pages read as they are needed: the scanner decodes a row group whole
    before handing out its first row)."""
    rows = slice_rows or 0  # 0: no span is read page by page
    # whether span i is read page by page: asked once per span (the loop looks at the span that ends a run
    # of scanned spans twice; two slots, so memory stays flat however many spans)
    paged = functools.lru_cache(maxsize=2)(lambda i: rows > 0 and _paged(query, tasks, spans[i], rows))
    k = 0
    while k < len(spans):
        if paged(k):
            yield read_pages(query, tasks[spans[k][0]], rows)
            k += 1
            continue
        if not all(_simple(t) for t in tasks[spans[k][0] : spans[k][1]]):
            yield read_span(query, tasks[spans[k][0] : spans[k][1]])
            k += 1
            continue
        end = k
        while end < len(spans) and all(_simple(t) for t in tasks[spans[end][0] : spans[end][1]]) and not paged(end):
            end += 1
        yield from _scan_spans(query, tasks, spans[k:end])
        k = end


def _paged(query: Query, tasks: Sequence[ReadTask], span: tuple[int, int], slice_rows: int) -> bool:
    a, b = span
    return b - a == 1 and tasks[a].num_rows > 2 * slice_rows and pages_stream(query, tasks[a])


PAGE_BUFFER = 1 << 20  # bytes a paged read takes from the file at a time


def pages_stream(query: Query, task: ReadTask) -> bool:
    """Whether ``read_pages`` returns exactly what the dataset scanner returns for ``task``: a whole row
    group of a local file, no filter, and every column read stored in the file in the type the scan gives it
    (no partition column, no column the file lacks, no cast)."""
    from dal.storage import uris

    if query.condition is not None or not _simple(task) or not uris.is_local(query.source.location):
        return False
    physical = query.fragment(task).physical_schema
    for name in query.scan_columns() or query.schema.names:
        i, j = physical.get_field_index(name), query.schema.get_field_index(name)
        if i < 0 or j < 0 or not physical.field(i).type.equals(query.schema.field(j).type):
            return False
    return True


def read_pages(query: Query, task: ReadTask, slice_rows: int) -> Iterator[pa.Table]:
    """The rows of one whole row group (``pages_stream`` holds) as tables of ``slice_rows`` rows, its pages
    read and decoded as the slices are taken; the rows its footer claims, checked at the end (``check_rows``)."""
    import pyarrow.parquet as pq

    names = query.scan_columns() or query.schema.names
    schema = pa.schema([query.schema.field(n) for n in names])
    fragment = query.fragment(task)
    held = 0
    with translate_missing(query.source), query.filesystem.open_input_file(fragment.path) as f:
        pages = pq.ParquetFile(
            f, metadata=fragment.metadata, buffer_size=PAGE_BUFFER, pre_buffer=False, coerce_int96_timestamp_unit="us"
        )
        for batch in pages.iter_batches(slice_rows, row_groups=[task.row_group], columns=names, use_threads=True):
            held += batch.num_rows
            yield query.restore(pa.Table.from_arrays(batch.columns, schema=schema))
    if held != task.num_rows:
        raise _lying_footer(query, [task], task.num_rows, held)


def _scan_spans(query: Query, tasks: Sequence[ReadTask], spans: Sequence[tuple[int, int]]) -> Iterator[pa.Table]:
    fragments, owner = [], {}
    for k, (a, b) in enumerate(spans):
        i = a
        while i < b:
            j = i
            while j + 1 < b and tasks[j + 1].uri == tasks[i].uri and tasks[j + 1].row_group == tasks[j].row_group + 1:
                j += 1
            fragment = query.fragment(tasks[i], [t.row_group for t in tasks[i : j + 1]])
            owner[(fragment.path, tasks[i].row_group)] = k
            fragments.append(fragment)
            i = j + 1
    rg_bytes, rg_rows = query.row_group_bytes()
    schema = query.schema if query.columns is None else pa.schema([query.schema.field(c) for c in query.columns])
    dataset = _files_dataset(fragments, query)
    scanner = dataset.scanner(
        columns=query.scan_columns(),
        filter=query.scan_filter,
        batch_size=max(rg_rows, 1),
        use_threads=True,
        fragment_readahead=int(max(1, min(4, READAHEAD_BUDGET // max(rg_bytes, 1)))),
        batch_readahead=int(max(2, min(16, READAHEAD_BUDGET // max(rg_bytes, 1)))),
        fragment_scan_options=scan_options(query),
    )
    current, held = 0, list[pa.RecordBatch]()
    for tagged in scanner.scan_batches():
        fragment = tagged.fragment
        k = owner[(fragment.path, fragment.row_groups[0].id)]
        while current < k:
            yield query.restore(pa.Table.from_batches(held, schema=schema))
            current, held = current + 1, []
        batch = query.refine(tagged.record_batch)  # the exact filter, where the scan's was widened
        if batch.num_rows:
            held.append(batch)
    while current < len(spans):
        yield query.restore(pa.Table.from_batches(held, schema=schema))
        current, held = current + 1, []


def chunks_ahead(query: Query) -> int:
    """Chunks read ahead of the consumer: CHUNKS_AHEAD, fewer when their row groups would not fit
    READAHEAD_BUDGET decoded bytes (memory stays bounded whatever the row-group size)."""
    rg_bytes, _ = query.row_group_bytes()
    return int(max(1, min(CHUNKS_AHEAD, READAHEAD_BUDGET // max(2 * rg_bytes, 1))))


class RowReader:
    """Rows ``[start, stop)`` of an epoch's whole order (its tasks, chunked and permuted as ``read_chunks``
    reads them), reading only the chunks that hold them: how resumption and canonical shards cut the
    order anywhere without reading the prefix. Keeps the last chunk read (consecutive ranges share it)."""

    def __init__(
        self,
        query: Query,
        tasks: Sequence[ReadTask],
        spans: Sequence[tuple[int, int]],
        counts: Sequence[int],
        permute: tuple[int, int] | None,
    ) -> None:
        self.query, self.tasks, self.spans, self.permute = query, list(tasks), list(spans), permute
        self.starts = [0]
        for a, b in spans:
            self.starts.append(self.starts[-1] + sum(counts[a:b]))
        self.total = self.starts[-1]
        self._last: tuple[int, pa.Table] | None = None

    def chunk(self, i: int) -> pa.Table:
        if self._last is None or self._last[0] != i:
            a, b = self.spans[i]
            with translate_missing(self.query.source):
                table = read_span(self.query, self.tasks[a:b])
            check_rows(self.query, self.tasks[a:b], table)
            self._last = (i, combine([table], self.tasks[a], self.permute))
        return self._last[1]

    def rows(self, start: int, stop: int) -> list[pa.Table]:
        """The rows ``[start, stop)`` (0 <= start <= stop <= total) as slices of their chunks."""
        return slice_chunks(self.starts, self.chunk, start, stop)


def slice_chunks(starts: Sequence[int], chunk: Callable[[int], pa.Table], start: int, stop: int) -> list[pa.Table]:
    """Rows ``[start, stop)`` of consecutive chunks (chunk i holds rows ``[starts[i], starts[i + 1])``) as
    slices of the chunks that hold them, read with ``chunk(i)``."""
    out = []
    i = max(bisect.bisect_right(starts, start) - 1, 0)
    while start < stop and i < len(starts) - 1:
        lo, hi = starts[i], starts[i + 1]
        if hi > start:
            a, b = start - lo, min(stop, hi) - lo
            out.append(chunk(i).slice(a, b - a))
            start = lo + b
        i += 1
    return out


def rebatch(tables: Iterator[pa.Table], size: int) -> Iterator[pa.RecordBatch]:
    """Exactly ``size`` rows per batch (the last may be shorter): slices of each chunk, and one small
    concatenation where a batch straddles two chunks."""
    carry: pa.Table | None = None
    for table in tables:
        if carry is not None:
            need = size - carry.num_rows
            head = table.slice(0, need)
            carry = pa.concat_tables([carry, head]).combine_chunks()
            table = table.slice(need)
            if carry.num_rows < size:
                continue
            yield _one_batch(carry)
            carry = None
        start = 0
        while table.num_rows - start >= size:
            yield _one_batch(table.slice(start, size))
            start += size
        if start < table.num_rows:
            carry = table.slice(start)
    if carry is not None and carry.num_rows:
        yield _one_batch(carry)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    return table.combine_chunks().to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], table.schema)
