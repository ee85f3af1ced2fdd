"""ReadTask: the picklable unit of reading — one row group of one file, optionally a slice of its rows.

A *file task* (``row_group == WHOLE_FILE``) stands for every row group of one file before its footer is read:
planning without a filter makes one per file from the row count the log records (``Query.file_tasks``), shards
cut them by rows, and ``Query.expand`` turns them into row-group tasks when the file is about to be read.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import overload

import numpy as np
import pyarrow as pa

WHOLE_FILE = -1  # the row group of a file task: the whole file, its row groups not yet known


@dataclass(frozen=True)
class ReadTask:
    """Rows of one row group. ``offset``/``length`` count rows that pass the scan's filter (for sharding)."""

    uri: str
    row_group: int  # WHOLE_FILE: a file task (``deleted`` then counts positions in the file)
    partition_values: tuple[tuple[str, str | None], ...]
    num_rows: int  # rows in the row group (a file task: in the file), before filtering
    offset: int = 0
    length: int | None = None  # None: every (matching) row from offset on
    deleted: tuple[int, ...] = ()  # positions in the row group a deletion vector removes (sorted)
    exact: bool = False  # read through fragments.read_exact (deletion vectors, column mapping)

    @property
    def live_rows(self) -> int:
        """Rows of the row group a reader sees, before filtering (deleted rows removed)."""
        return self.num_rows - len(self.deleted)

    @property
    def whole_file(self) -> bool:
        """Whether this is a file task (its row groups resolved when the file is opened)."""
        return self.row_group == WHOLE_FILE

    def slice(self, offset: int, length: int) -> ReadTask:
        return replace(self, offset=self.offset + offset, length=length)


Values = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, eq=False)
class FileColumns:
    """Every file of a version as columns (a table log's: ``dal.formats.index.FileIndex.columns``): paths
    relative to the root ('/'-separated; a URI is ``prefix`` + the path, its '/' spelled ``sep``), row counts,
    partition values (each file's at ``part_of`` in ``parts``), deletion-vector positions by path, and whether
    every task reads through ``read_exact`` (column mapping)."""

    paths: pa.Array
    prefix: str
    sep: str
    rows: np.ndarray
    parts: Sequence[Values]
    part_of: np.ndarray
    deleted: Mapping[str, tuple[int, ...]]
    exact: bool

    def uri(self, path: str) -> str:
        return self.prefix + (path if self.sep == "/" else path.replace("/", self.sep))

    @cached_property
    def gone(self) -> np.ndarray:
        """Rows each file's deletion vector removes."""
        if not self.deleted:
            return np.zeros(len(self.rows), dtype=np.int64)
        return np.array([len(self.deleted.get(p, ())) for p in self.paths.to_pylist()], dtype=np.int64)


class FileTasks(Sequence[ReadTask]):
    """File tasks as columns: a plan of one task per file without an object per file (``Query.file_tasks``).

    ``columns`` are the log's, shared by every view; a view is the files it takes of them, in its order
    (``at``; None: all, in column order), and each one's ``offset``/``length`` (a shard's cut; -1 for a length
    of None). A ``ReadTask`` is made when one is indexed or iterated, so a plan of a million files costs
    arrays, and a rank makes objects for its share only. It equals a list of the same tasks, and pickles as its
    columns (DataLoader workers, Spark tasks)."""

    def __init__(
        self,
        columns: FileColumns,
        at: np.ndarray | None = None,
        offset: np.ndarray | None = None,
        length: np.ndarray | None = None,
    ) -> None:
        self.columns, self.at, self.offset, self.length = columns, at, offset, length

    def __len__(self) -> int:
        return len(self.columns.rows) if self.at is None else len(self.at)

    def _positions(self) -> np.ndarray:
        return np.arange(len(self.columns.rows), dtype=np.intp) if self.at is None else self.at

    def _task(self, k: int, i: int) -> ReadTask:
        """The task at view position ``i`` (file ``k`` of the columns)."""
        return next(self._tasks([k], [i]))

    def _tasks(self, files: np.ndarray | list[int] | None, positions: list[int] | slice) -> Iterator[ReadTask]:
        """The tasks of ``files`` (column positions; None: all, in order) at view ``positions``."""
        c = self.columns
        if files is None:
            paths, rows, gone, part_of = c.paths.to_pylist(), c.rows.tolist(), c.gone.tolist(), c.part_of.tolist()
        else:
            paths = c.paths.take(pa.array(files, pa.int64())).to_pylist()
            rows, gone, part_of = c.rows[files].tolist(), c.gone[files].tolist(), c.part_of[files].tolist()
        offsets = self.offset[positions].tolist() if self.offset is not None else None
        lengths = self.length[positions].tolist() if self.length is not None else None
        parts, deleted, none = c.parts, c.deleted, ()
        prefix, slash = c.prefix, c.sep == "/"
        for n, path in enumerate(paths):
            length = -1 if lengths is None else lengths[n]
            yield ReadTask(
                prefix + path if slash else c.uri(path),
                WHOLE_FILE,
                parts[part_of[n]],
                rows[n],
                offset=0 if offsets is None else offsets[n],
                length=None if length < 0 else length,
                deleted=deleted.get(path, none) if gone[n] else none,
                exact=c.exact or gone[n] > 0,
            )

    @overload
    def __getitem__(self, i: int) -> ReadTask: ...

    @overload
    def __getitem__(self, i: slice) -> FileTasks: ...

    def __getitem__(self, i: int | slice) -> ReadTask | FileTasks:
        if isinstance(i, slice):
            return self._view(self._positions()[i], *self._cuts(i))
        n = len(self)
        j = operator.index(i)
        if not -n <= j < n:
            raise IndexError("task index out of range")
        j %= n
        return self._task(j if self.at is None else int(self.at[j]), j)

    def _cuts(self, which: slice | np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        return (
            None if self.offset is None else self.offset[which],
            None if self.length is None else self.length[which],
        )

    def _view(self, at: np.ndarray, offset: np.ndarray | None, length: np.ndarray | None) -> FileTasks:
        return FileTasks(self.columns, at, offset, length)

    def __iter__(self) -> Iterator[ReadTask]:
        return self._tasks(self.at, slice(None))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # a sequence, like list

    def __repr__(self) -> str:
        return f"FileTasks({len(self)} file tasks)"

    def task_rows(self) -> np.ndarray:
        """Rows each task yields without a filter (its slice's length, else its file's live rows), as int64."""
        c = self.columns
        live = c.rows - c.gone if self.at is None else c.rows[self.at] - c.gone[self.at]
        return live if self.length is None else np.where(self.length >= 0, self.length, live)

    def cut(self, counts: np.ndarray, ranges: Sequence[tuple[int, int]]) -> FileTasks:
        """The tasks (whole or sliced) that hold the global row ``ranges`` of these tasks (``counts`` rows each):
        ``dal.read.plan.cut`` over arrays (``dal.read.sharding.assign``'s arithmetic, by binary search)."""
        counts = np.asarray(counts, dtype=np.int64)
        bounds = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        picked, offsets, lengths = [], [], []
        for start, want in ranges:
            end = start + want
            first = int(np.searchsorted(bounds[1:], start, side="right"))  # the first task ending after start
            stop = int(np.searchsorted(bounds[:-1], end, side="left"))  # the first task starting at or after end
            idx = np.arange(first, max(first, stop), dtype=np.intp)
            idx = idx[counts[idx] > 0]
            lo = np.maximum(bounds[idx], start)
            picked.append(idx)
            offsets.append(lo - bounds[idx])
            lengths.append(np.minimum(bounds[idx + 1], end) - lo)
        idx = np.concatenate(picked) if picked else np.zeros(0, dtype=np.intp)
        off = np.concatenate(offsets) if offsets else np.zeros(0, dtype=np.int64)
        size = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
        whole = (off == 0) & (size == counts[idx])  # a whole task stays as it was
        old_offset, old_length = self._cuts(idx)
        base = old_offset if old_offset is not None else np.zeros(len(idx), dtype=np.int64)
        new_offset = np.where(whole, base, base + off)
        new_length = np.where(whole, old_length if old_length is not None else -1, size)
        return self._view(self._positions()[idx], new_offset, new_length)
