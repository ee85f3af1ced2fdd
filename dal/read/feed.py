"""Feeding training: a rank's epoch as a list of units (chunks), canonical shards, resumption state.

Framework-free: the adapters (torch, tf) convert each unit's Arrow table once (on a reader thread) and
hand out batches as slices of it. What is defined here is *which rows, in which order*:

- Without ``num_canonical_shards``: the rank's rows are its ``Scan.shard`` (or the whole scan), read as
  the chunks ``Scan.iter_chunks`` makes; resuming skips the rows consumed (same world size).
- With ``num_canonical_shards=C`` (elastic): the epoch's whole order G (row groups permuted per epoch,
  rows permuted inside each chunk) is cut into C equal canonical shards (the last ones padded by
  wrapping around, as ``remainder="pad"``). Global step t takes rows [t·m, (t+1)·m) of every canonical
  shard, shard 0 first; rank r of W owns canonical shards [r·C/W, (r+1)·C/W), so its batch of step t
  holds those shards' pieces (batch_size = m·C/W) and the concatenation of all ranks' batches of step t
  is the same whatever W (and whatever the worker count). After t steps every canonical shard has
  given exactly t·m rows, so a checkpoint is one number and resumes at any W that divides C.

Every rule above is written once, against ``dal.read.source.Source``: a plain scan (``RowGroups``) streams
its plan's chunks (one pyarrow scanner per rank); a sample, a balance or a mix (``Picked``, ``Mixed``) is
read as virtual rows numbered 0…N-1 (N known before reading), which rank r of W shares as
``share(N, r, W)``, DataLoader workers split again ("keep"), resumption skips and canonical shards cut. The
source answers each question (``rank_stream``, ``rank_rows``, ``worker_chunks``, ``numbered``,
``identity``); nothing here asks which kind it holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from dal.errors import DalError
from dal.read import reader
from dal.read.sharding import share, wrapped
from dal.read.source import Source, Stream, Unit, rows_unit

__all__ = ["Position", "Stream", "Unit", "canonical_stream", "check_state", "make_state", "split_batches"]
STATE_FORMAT = 1
T = TypeVar("T")


@dataclass(frozen=True)
class Position:
    """Where a rank is in an epoch: ``rows`` of its stream consumed (elastic: rows of EACH canonical shard)."""

    epoch: int
    rows: int


def check_state(source: Source, state: dict[str, Any], canonical: int | None) -> Position:
    """Validate a ``state_dict`` against this source (same dataset, version, seed, sample or mix, canonical
    shards)."""
    import json

    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise DalError(f"not a dal loader state (format {STATE_FORMAT}): {str(state)[:200]}")
    ds = source.dataset
    mine_all = {**source.identity(), "canonical": canonical}
    if canonical is None:  # a rank's rows depend on how the source is cut between ranks
        mine_all["remainder"] = source.shard[2] if source.shard is not None else None
    for key, mine in mine_all.items():
        # a state saved before dal recorded a key stands for the default (a sharded one's remainder: "pad")
        default = "pad" if key == "remainder" and state.get("world") is not None else None
        theirs = json.loads(json.dumps(state.get(key, default)))
        if theirs != mine:
            saved = f"{key}={state[key]!r}" if key in state else f"no {key} recorded (an older dal's state)"
            raise DalError(
                f"cannot resume {ds.name} version {ds.number}: the state was saved with {saved}, "
                f"this loader has {key}={mine!r}; resume with the scan the state was saved from"
            )
    world = list(source.shard[:2]) if source.shard is not None else None
    if canonical is None and state.get("world") != world:
        raise DalError(
            f"cannot resume {ds.name}: the state was saved as rank/world {state.get('world')}, this loader is "
            f"{world}; resuming at another world size needs num_canonical_shards"
        )
    return Position(int(state["epoch"]), int(state["rows"]))


def make_state(source: Source, canonical: int | None, position: Position) -> dict[str, Any]:
    return {
        "format": STATE_FORMAT,
        **source.identity(),
        "canonical": canonical,
        # without canonical shards a rank's rows depend on its rank and world size (with them, they do not)
        "world": list(source.shard[:2]) if source.shard is not None and canonical is None else None,
        "remainder": source.shard[2] if source.shard is not None and canonical is None else None,
        "epoch": position.epoch,
        "rows": position.rows,
    }


def canonical_stream(source: Source, canonical: int, rank: int, world: int, batch_size: int, skip: int) -> Stream:
    """The rank's stream with ``canonical`` canonical shards (see the module docstring), each canonical
    shard's first ``skip`` rows already consumed. Units hold whole steps, rows in step-major order."""
    if canonical % world:
        raise DalError(f"num_canonical_shards={canonical} must be a multiple of the world size {world}")
    owned = canonical // world
    if batch_size % owned:
        raise DalError(
            f"batch_size {batch_size} must be a multiple of num_canonical_shards / world size = {owned} "
            "(each batch takes the same number of rows from each canonical shard the rank owns)"
        )
    micro = batch_size // owned
    rows_reader = source.numbered()  # the whole epoch, every rank's rows
    chunk = reader.chunk_rows(source.query)
    total = rows_reader.total
    per = math.ceil(total / canonical) if total else 0
    starts = [share(total, c, canonical, "pad")[0][0] if total else 0 for c in range(canonical)]
    left = max(per - skip, 0)
    steps_per_unit = max(1, chunk // max(batch_size, 1))
    span = steps_per_unit * micro  # rows of each canonical shard per unit
    units: list[Unit] = []
    for lo in range(skip, skip + left, span):
        hi = min(lo + span, per)
        ranges: list[tuple[int, int]] = []
        sizes: list[int] = []
        for c in range(rank * owned, (rank + 1) * owned):
            ranges += wrapped(starts[c] + lo, starts[c] + hi, total)
            sizes.append(hi - lo)
        units.append(rows_unit(rows_reader, ranges, _step_major(sizes, micro)))
    return Stream(units, left * owned, batch_size)


def _step_major(sizes: Sequence[int], micro: int) -> np.ndarray:
    """The gather that reorders canonical-shard blocks (each ``sizes[c]`` rows, concatenated) into steps:
    step s = block 0 rows [s·m, (s+1)·m), then block 1's, …"""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    n = max(sizes) if sizes else 0
    order = []
    for s in range(0, n, micro):
        for c, size in enumerate(sizes):
            if s < size:
                order.append(np.arange(offsets[c] + s, offsets[c] + min(s + micro, size), dtype=np.int64))
    return np.concatenate(order) if order else np.zeros(0, dtype=np.int64)


def split_batches(
    chunks: Iterator[tuple[int, T]],
    size: int,
    take: Callable[[T, int, int], Any],
    join: Callable[[Any, Any], Any],
    split: Callable[[T, int, int, int], Iterator[Any]] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Batches of exactly ``size`` rows (the last may be shorter) out of converted chunks ``(rows, data)``:
    ``take(data, a, b)`` slices (views), ``join(x, y)`` concatenates where a batch straddles two chunks,
    ``split(data, start, size, count)`` (optional) gives the ``count`` whole batches from ``start`` at once
    (what ``take`` would give one by one)."""
    carry: Any = None
    held = 0
    for n, data in chunks:
        start = 0
        if held:
            need = min(size - held, n)
            carry, held = join(carry, take(data, 0, need)), held + need
            start = need
            if held < size:
                continue
            yield held, carry
            carry, held = None, 0
        count = (n - start) // size
        if split is not None and count:
            for batch in split(data, start, size, count):
                yield size, batch
            start += count * size
        while n - start >= size:
            yield size, take(data, start, start + size)
            start += size
        if start < n:
            carry, held = take(data, start, n), n - start
    if held:
        yield held, carry
