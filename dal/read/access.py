"""Random access to a scan's rows by position: ``len``, one row, a batch of rows (``take``).

A scan's rows are numbered 0…N-1 in its unshuffled reading order (files and row groups as planned, the
filter, window and deletion vectors applied, the shard's rows when sharded): the order ``to_arrow()``
returns. The numbering is fixed by the pinned version, so every process (DataLoader workers of any start
method, every rank) agrees on it: a sampler such as torch's ``DistributedSampler`` can split the positions.

Cost: planning counts the matching rows of each row group (footers; a read of the filter's columns when
filtered). A ``take`` reads each row group it touches whole (Parquet's unit of decoding) and keeps the
most recently used ones up to ``CACHE_BYTES`` of decoded data (per process: each DataLoader worker has its
own), so positions that stay near each other (a sampler's sorted batch) cost one decode per row group, and a
dataset (projection) that fits in ``CACHE_BYTES`` is decoded once; fully random positions over a larger one
cost about one row-group decode per row (docs/training.md gives measured figures).
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.errors import DalError
from dal.read import reader
from dal.read.pinned import translate_missing
from dal.read.source import RowGroups, Source

if TYPE_CHECKING:
    from dal.read.tasks import ReadTask

CACHE_BYTES = 256 * 1024 * 1024  # decoded row groups a RowIndex keeps (most recently used first)


class RowIndex:
    """A scan's rows by position (see the module docstring). Picklable: a copy re-reads what it needs.

    Raises:
        DalError: a sampled or balanced scan (its rows change each epoch: iterate it instead).
    """

    def __init__(self, source: Source, cache_bytes: int = CACHE_BYTES) -> None:
        if not isinstance(source, RowGroups):
            raise DalError(f"random access needs a fixed set of rows: {source.WHAT} changes each epoch")
        self.source = dataclasses.replace(source, shuffle=None)  # positions in reading order, whatever the epoch
        self.cache_bytes = cache_bytes
        self.tasks: list[ReadTask] = self.source.plan()
        counts = self.source.task_rows(self.tasks)
        self.starts = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))])
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"], state["_lock"] = OrderedDict(), None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def positions(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """``indices`` as int64 positions in [0, len), negative ones counted from the end.

        Positions are integers only: NumPy integer arrays of any width, Python ints of any size (a list
        holding one past int64 is an object array, checked one by one). Booleans are refused (NumPy reads
        a bool array as a mask, a list as positions 0 and 1: neither is meant here), and so are floats,
        ``timedelta64`` (NumPy files it under integers), ``datetime64`` and other objects.

        Raises:
            IndexError: a position out of range, of any width (``for row in ds`` relies on it); TypeError: not
                integers.
        """
        idx = np.asarray(indices).reshape(-1)
        n = len(self)
        if idx.dtype.kind == "O":
            return self._object_positions(idx, n)
        if idx.size and idx.dtype.kind not in "iu":  # "m" (timedelta64) passes np.issubdtype(_, np.integer)
            raise TypeError(f"row positions must be integers, not {idx.dtype}")
        # compared in their own dtype: a uint64 past 2**63-1 cast to int64 first would wrap to a negative row
        bad = (idx >= n) if idx.dtype.kind == "u" else (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(f"row {idx[int(np.flatnonzero(bad)[0])]} is out of range for {n} rows")
        idx = idx.astype(np.int64, copy=False)
        return np.where(idx < 0, idx + n, idx)

    @staticmethod
    def _object_positions(idx: np.ndarray, n: int) -> np.ndarray:
        """An object array's positions: each an integer (``operator.index``, not a bool), checked as a Python int."""
        out = np.empty(idx.size, dtype=np.int64)
        for k, value in enumerate(idx):
            try:
                if isinstance(value, bool | np.bool_):
                    raise TypeError
                i = operator.index(value)  # a nested array or list has no __index__ (or refuses it)
            except TypeError:
                raise TypeError(f"row positions must be integers, not {type(value).__name__}") from None
            if not -n <= i < n:
                raise IndexError(f"row {i} is out of range for {n} rows")
            out[k] = i + n if i < 0 else i
        return out

    def _group(self, t: int) -> pa.Table:
        with self._lock:
            held = self._cache.get(t)
            if held is not None:
                self._cache.move_to_end(t)
                return held
        with translate_missing(self.source.dataset):
            table = reader.read_task(self.source.query, self.tasks[t])
        reader.check_rows(self.source.query, [self.tasks[t]], table)  # positions come from the footers' counts
        with self._lock:
            self._cache[t] = table
            held_bytes = sum(x.nbytes for x in self._cache.values())
            while len(self._cache) > 1 and held_bytes > self.cache_bytes:
                held_bytes -= self._cache.popitem(last=False)[1].nbytes
        return table

    def take(self, indices: Sequence[int] | np.ndarray) -> pa.Table:
        """The rows at ``indices``, in that order (repeats allowed), as one Arrow table of the scan's columns."""
        idx = self.positions(indices)
        if idx.size == 0:
            schema = self.source.arrow_schema
            return pa.Table.from_batches([], schema=pa.schema([schema.field(n) for n in self.source.output_names]))
        group = np.searchsorted(self.starts, idx, side="right") - 1
        order = np.argsort(group, kind="stable")
        pieces = []
        for t in np.unique(group):
            local = idx[order][group[order] == t] - self.starts[t]
            pieces.append(self._group(int(t)).take(pa.array(local)))
        table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        if len(pieces) > 1 or not np.array_equal(order, np.arange(idx.size)):
            table = table.take(pa.array(np.argsort(order, kind="stable")))
        return table.combine_chunks()
