"""Sequences: fixed-length, time-ordered windows of a table's rows (``Scan.sequences``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pyarrow as pa


def windows(
    table: pa.Table, length: int, step: int, column: str, by: str | None, max_gap: timedelta | float | None
) -> Iterator[pa.Table]:
    """Windows of ``length`` rows starting every ``step`` rows of ``table`` sorted by (``by``, ``column``), never
    crossing a change of ``by`` nor a jump in ``column`` larger than ``max_gap``."""
    keys = [c for c in (by, column) if c is not None]
    table = table.sort_by([(k, "ascending") for k in keys])
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
