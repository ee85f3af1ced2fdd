"""Splitting a scan's rows between ranks (and DataLoader workers): list arithmetic over counted tasks.

Rows are numbered in task order; rank ``r`` of ``world`` takes a contiguous range of that numbering, cut
out of whole tasks or out of the middle of a row group — so fewer row groups than ranks is fine.

remainder:
- ``"pad"`` (default, like torch's DistributedSampler): every rank gets ceil(N / world) rows; the last
  ranks wrap around to the first rows, so at most world-1 rows are read twice. No row is lost.
- ``"drop"``: every rank gets floor(N / world) rows; the last N mod world rows are not read.
- ``"keep"``: ranks get floor or ceil of N / world rows; the union is exactly the scan's rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

import pyarrow as pa

Remainder = Literal["pad", "drop", "keep"]


def share(total: int, rank: int, world: int, remainder: Remainder = "pad") -> list[tuple[int, int]]:
    """Global row ranges ``[(start, length)]`` of ``rank``'s share of ``total`` rows."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, world_size): got rank={rank}, world_size={world}")
    if total == 0:
        return []
    if remainder == "keep":
        start, end = rank * total // world, (rank + 1) * total // world
        return [(start, end - start)] if end > start else []
    if remainder == "drop":
        per = total // world
        return [(rank * per, per)] if per else []
    per = math.ceil(total / world)
    start = rank * per
    out = []
    while per > 0:  # wrap around the start (pad): total may be smaller than per in degenerate cases
        start %= total
        n = min(per, total - start)
        out.append((start, n))
        per -= n
        start += n
    return out


def wrapped(start: int, stop: int, total: int) -> list[tuple[int, int]]:
    """Row range [start, stop) of a sequence of ``total`` rows read over and over (padding repeats the first
    rows; a mix starts a shorter source over), as ranges inside [0, total)."""
    out = []
    while start < stop:
        a = start % total
        n = min(stop - start, total - a)
        out.append((a, a + n))
        start += n
    return out


def assign(counts: Sequence[int], ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Map global row ranges onto tasks: ``[(task index, offset in task, length)]`` in range order."""
    bounds = [0]
    for c in counts:
        bounds.append(bounds[-1] + c)
    out = []
    for start, length in ranges:
        end = start + length
        for i, c in enumerate(counts):
            lo, hi = bounds[i], bounds[i + 1]
            if c == 0 or hi <= start or lo >= end:
                continue
            a, b = max(lo, start), min(hi, end)
            out.append((i, a - lo, b - a))
    return out


def slice_rows(batches: Iterable[pa.RecordBatch], offset: int, length: int | None) -> Iterator[pa.RecordBatch]:
    """Rows ``[offset, offset + length)`` of a stream of (filtered) batches: a sliced ReadTask's rows."""
    skip, take = offset, length
    for batch in batches:
        if take is not None and take <= 0:
            return
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        if skip:
            batch, skip = batch.slice(skip), 0
        if take is not None:
            batch = batch.slice(0, take)
            take -= batch.num_rows
        if batch.num_rows:
            yield batch
