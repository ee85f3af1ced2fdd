"""Read statistics: what a scan's reads did — rows, bytes, files and row groups read and pruned, time, file cache.

``Scan.stats()`` sums the reads made through one Scan object (each pass of ``iter_chunks`` / ``iter_batches`` /
``to_arrow`` …; the epochs of ``iter_batches(num_epochs=…)`` and of an adapter's ``set_epoch`` included),
``Dataset.stats()`` every read of an opened version, and each ``dal.read_log()`` entry the reads made under its
(dataset, version, filters). Counted in the process that reads: DataLoader workers and Ray tasks count their own.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dal.read.tasks import ReadTask


@dataclass(frozen=True)
class ReadStats:
    """What reads of one version did.

    - ``rows``: rows handed to the caller; ``chunks``: the chunks they came in; ``reads``: passes (epochs) summed.
    - ``bytes_read``: compressed bytes of the column chunks read (the projection and the filter's columns of each
      row group read, from the footers): what storage served, before decompression.
    - ``files_read`` / ``row_groups_read``: distinct files and row groups read (a rank's share when sharded).
    - ``files_pruned`` / ``row_groups_pruned``: what the plan ruled out before reading — files by partition values
      and the time window, row groups of the remaining files by their statistics (for the whole scan, before
      sharding; per pass, so an epoch's plan is counted once per pass).
    - ``seconds``: wall time from the first request to the last chunk handed out (the caller's time between
      chunks included: it is the epoch as the training loop saw it).
    - ``cache_hits`` / ``cache_misses``, ``cache_bytes_fetched`` / ``cache_bytes_from_cache``: ranges the file
      cache (``dal.open(…, cache="local")``) served from local disk or fetched from storage (0 when uncached; a
      cache is per opened version, so two scans of it read at once share these counts).
    """

    dataset: str
    version: int
    reads: int = 0
    rows: int = 0
    chunks: int = 0
    bytes_read: int = 0
    files_read: int = 0
    files_pruned: int = 0
    row_groups_read: int = 0
    row_groups_pruned: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_bytes_fetched: int = 0
    cache_bytes_from_cache: int = 0

    def __add__(self, other: ReadStats) -> ReadStats:
        if not isinstance(other, ReadStats):
            return NotImplemented
        summed = {
            f.name: getattr(self, f.name) + getattr(other, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("dataset", "version")
        }
        return ReadStats(self.dataset, self.version, **summed)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        from dal.progress import size_text

        rate = f" ({self.rows / self.seconds:,.0f} rows/s)" if self.seconds > 0 and self.rows else ""
        cache = (
            f"; file cache {self.cache_hits:,} hits, {self.cache_misses:,} misses"
            if self.cache_hits or self.cache_misses
            else ""
        )
        return (
            f"{self.dataset}@{self.version}: {self.rows:,} rows in {self.chunks:,} chunks, "
            f"{size_text(self.bytes_read)} read in {self.seconds:.2f} s{rate}; "
            f"{self.files_read:,} files ({self.files_pruned:,} pruned), "
            f"{self.row_groups_read:,} row groups ({self.row_groups_pruned:,} pruned){cache}"
        )


def merge(entry: dict[str, Any] | None, stats: ReadStats) -> dict[str, Any]:
    """``stats`` added to a read-log entry's statistics (a dict: the read log keeps plain values)."""
    return stats.to_dict() if entry is None else (ReadStats(**entry) + stats).to_dict()


class StatsBox:
    """The running total of the reads made through one Scan (or Dataset). Thread-safe; a pickled copy (a
    DataLoader worker) starts from nothing: each process counts its own reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total: ReadStats | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, stats: ReadStats) -> None:
        with self._lock:
            self.total = stats if self.total is None else self.total + stats

    def get(self, dataset: str, version: int) -> ReadStats:
        with self._lock:
            return self.total if self.total is not None else ReadStats(dataset, version)


class Recorder:
    """Counts one pass of a scan while its chunks are handed out; ``finish`` makes the ReadStats."""

    def __init__(self, scan: Any) -> None:
        from dal.storage import rangecache

        self.scan = scan
        self.cache = rangecache.of(scan.dataset.storage_options)
        self.cache_before = dataclasses.replace(self.cache.stats) if self.cache is not None else None
        self.started = time.perf_counter()
        self.rows = 0
        self.chunks = 0
        self.read: list[ReadTask] = []
        self.done = False

    def counting(self, convert: Any) -> Any:
        """``convert`` returning ``(rows, converted)``: the rows of a chunk before conversion (a converted chunk,
        a dict of decoded arrays, has no row count of its own)."""

        def wrapped(table: Any) -> tuple[int, Any]:
            return table.num_rows, (convert(table) if convert is not None else table)

        return wrapped

    def handed(self, rows: int, tasks: Sequence[ReadTask] = ()) -> None:
        self.rows += rows
        self.chunks += 1
        self.read.extend(tasks)

    def finish(self) -> ReadStats:
        self.done = True
        seconds = time.perf_counter() - self.started
        query = self.scan.query
        files = {t.uri for t in self.read}
        groups = {(t.uri, t.row_group) for t in self.read}
        pruning = query.store.pruning or (0, 0, 0, 0)
        hits = misses = fetched = from_cache = 0
        if self.cache is not None and self.cache_before is not None:
            now, before = self.cache.stats, self.cache_before
            hits, misses = now.hits - before.hits, now.misses - before.misses
            fetched = now.bytes_fetched - before.bytes_fetched
            from_cache = now.bytes_from_cache - before.bytes_from_cache
        return ReadStats(
            dataset=self.scan.dataset.name,
            version=self.scan.dataset.number,
            reads=1,
            rows=self.rows,
            chunks=self.chunks,
            bytes_read=_column_bytes(query, sorted(groups), self.read),
            files_read=len(files),
            files_pruned=pruning[0] - pruning[1],
            row_groups_read=len(groups),
            row_groups_pruned=pruning[2] - pruning[3],
            seconds=seconds,
            cache_hits=hits,
            cache_misses=misses,
            cache_bytes_fetched=fetched,
            cache_bytes_from_cache=from_cache,
        )


def _column_bytes(query: Any, groups: Sequence[tuple[str, int]], tasks: Sequence[ReadTask]) -> int:
    """Compressed bytes of the column chunks read: the scanned columns (projection and filter) of each row group,
    from the footers planning already holds."""
    if not groups:
        return 0
    wanted = query.scan_columns()
    wanted = None if wanted is None else set(wanted)
    first = {t.uri: t for t in reversed(tasks)}
    footers: dict[str, Any] = {}
    total = 0
    for uri, rg in groups:
        md = footers.get(uri)
        if md is None:  # once per file; planning holds the footer (a forked worker reads it once)
            md = footers[uri] = query.fragment(first[uri]).metadata
        if rg >= md.num_row_groups:
            continue
        group = md.row_group(rg)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if wanted is None or chunk.path_in_schema.split(".")[0] in wanted:
                total += chunk.total_compressed_size
    return total
