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

Sampled and balanced scans (``Scan.sample`` / ``Scan.balance``) and mixes (``dal.mix``) are *virtual row
sources* (``dal.read.sampling.Rows``): an epoch's rows numbered 0…N-1 (N known before reading), read by
ranges. Every rule above applies to that numbering: rank r of W takes ``share(N, r, W)`` of it, plain
DataLoader workers split the rank's rows again ("keep"), resumption skips rows of it, and canonical
shards cut it. A plain scan keeps its streaming path (one pyarrow scanner per rank).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import Field, dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from dal.errors import DalError
from dal.read import reader, sampling
from dal.read.plan import translate_missing
from dal.read.sharding import share, wrapped

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from dal.read.plan import Pinned, Query
    from dal.read.sharding import Remainder
    from dal.read.tasks import ReadTask
    from dal.scan import Scan

STATE_FORMAT = 1
T = TypeVar("T")
Unit = Callable[[], pa.Table]  # reads one unit's rows (on a reader thread)


@dataclass(frozen=True)
class Position:
    """Where a rank is in an epoch: ``rows`` of its stream consumed (elastic: rows of EACH canonical shard)."""

    epoch: int
    rows: int


class RowSource(Protocol):
    """What the feed and the training adapters (``TorchDataset``, ``to_tf``) read of a row source: a ``Scan``,
    or a mix (``dal.mixing.Mix``), which offers this much of a scan's API and is always read as virtual rows.
    Both are frozen dataclasses (``dataclasses.replace`` makes a variant)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def dataset(self) -> Pinned: ...
    @property
    def arrow_schema(self) -> pa.Schema: ...
    @property
    def output_names(self) -> list[str]: ...
    @property
    def query(self) -> Query: ...
    @property
    def shard_(self) -> tuple[int, int, Remainder] | None: ...
    @property
    def shuffle_(self) -> tuple[int, int] | None: ...
    @property
    def epoch(self) -> int: ...
    def shard(self, rank: int, world_size: int, remainder: Remainder = "pad") -> RowSource: ...
    def set_epoch(self, epoch: int) -> RowSource: ...
    def plan(self) -> list[ReadTask]: ...
    def iter_chunks(
        self, tasks: Sequence[ReadTask] | None = None, *, skip_rows: int = 0, convert: Any = None
    ) -> Iterator[Any]: ...


def is_plain(scan: RowSource) -> TypeIs[Scan]:
    """Whether ``scan`` is read as its plan's row groups: a ``Scan`` neither sampled nor balanced (a mix is
    always virtual)."""
    return not is_virtual(scan)


def is_virtual(scan: Any) -> bool:
    """Whether ``scan`` is read as virtual rows: a sampled or balanced scan, or a mix."""
    return getattr(scan, "sample_", None) is not None or hasattr(scan, "epoch_rows")


def virtual_rows(scan: Any) -> sampling.Rows:
    """The whole epoch (every rank's rows) of a virtual source, or of a plain scan."""
    if hasattr(scan, "epoch_rows"):
        return scan.epoch_rows()  # type: ignore[no-any-return]
    return sampling.scan_rows(scan)


def _rows_of(scan: Scan) -> dict[str, Any]:
    """What decides a plain scan's rows and their order besides dataset, version and seed: the filters and
    window (as SQL), the columns (they size the chunks, inside which a shuffle permutes rows) and the
    shuffle's buffer size."""
    from dal import expr

    condition = scan.condition
    return {
        "where": expr.to_sql(condition) if condition is not None else None,
        "columns": list(scan.columns) if scan.columns is not None else None,
        "buffer": scan.shuffle_[1] if scan.shuffle_ is not None else None,
    }


def _identity(scan: Any) -> dict[str, Any]:
    """What a state records of the source, JSON-normalised (a state may travel through JSON)."""
    import json

    if hasattr(scan, "identity"):  # a mix: its members' rows too
        out = {**scan.identity(), "members": [_rows_of(s) for s in scan.scans]}
    else:
        ds = scan.dataset
        seed = scan.shuffle_[0] if scan.shuffle_ is not None else None
        out = {"dataset": ds.name, "version": ds.number, "seed": seed, "sampling": sampling.describe(scan.sample_)}
        out |= _rows_of(scan)
    return json.loads(json.dumps(out))  # type: ignore[no-any-return]


def check_state(scan: RowSource, state: dict[str, Any], canonical: int | None) -> Position:
    """Validate a ``state_dict`` against this scan (same dataset, version, seed, sample or mix, canonical
    shards)."""
    import json

    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise DalError(f"not a dal loader state (format {STATE_FORMAT}): {str(state)[:200]}")
    ds = scan.dataset
    mine_all = {**_identity(scan), "canonical": canonical}
    if canonical is None:  # a rank's rows depend on how the scan is cut between ranks
        mine_all["remainder"] = scan.shard_[2] if scan.shard_ is not None else None
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
    world = list(scan.shard_[:2]) if scan.shard_ is not None else None
    if canonical is None and state.get("world") != world:
        raise DalError(
            f"cannot resume {ds.name}: the state was saved as rank/world {state.get('world')}, this loader is "
            f"{world}; resuming at another world size needs num_canonical_shards"
        )
    return Position(int(state["epoch"]), int(state["rows"]))


def make_state(scan: RowSource, canonical: int | None, position: Position) -> dict[str, Any]:
    return {
        "format": STATE_FORMAT,
        **_identity(scan),
        "canonical": canonical,
        # without canonical shards a rank's rows depend on its rank and world size (with them, they do not)
        "world": list(scan.shard_[:2]) if scan.shard_ is not None and canonical is None else None,
        "remainder": scan.shard_[2] if scan.shard_ is not None and canonical is None else None,
        "epoch": position.epoch,
        "rows": position.rows,
    }


class Stream(Generic[T]):
    """One rank's epoch as units to read in order; each unit's table holds whole batches except the last.

    ``units`` are callables (picklable closures are not needed: workers rebuild the stream)."""

    def __init__(self, units: list[Unit], rows: int, batch_size: int) -> None:
        self.units, self.rows, self.batch_size = units, rows, batch_size


def plain_stream(scan: RowSource, skip: int) -> Stream[Any]:
    """The rank's stream without canonical shards: its plan's chunks, the first ``skip`` rows dropped."""
    if not is_plain(scan):
        virtual, rows = sampling.rank_units(virtual_rows(scan), scan.shard_, skip)
        return Stream(virtual, rows, 0)
    tasks = scan.plan()
    spans = scan.chunk_spans(tasks)
    counts = scan.task_rows(tasks) if skip else None
    rows_reader: reader.RowReader | None = None

    def reader_of() -> reader.RowReader:
        nonlocal rows_reader, counts
        if rows_reader is None:
            counts = counts if counts is not None else scan.task_rows(tasks)
            rows_reader = reader.RowReader(scan.query, tasks, spans, counts, _permute(scan))
        return rows_reader

    target = reader.chunk_rows(scan.query)
    wide = any(sum(t.num_rows for t in tasks[a:b]) > 2 * target for a, b in spans)
    if not skip and not wide:
        # the common case reads straight through: no counts needed (a filtered count would read twice)
        units: list[Unit] = [_span_unit(scan, tasks, s) for s in spans]
        return Stream(units, -1, 0)
    # resuming, or row groups of many chunks' decoded size (images, tensors: a unit of chunk_rows keeps
    # a worker's first message and its memory proportional to the chunk; a worker reading a slice reads
    # the row group's encoded bytes and decodes only the slice)
    r = reader_of()
    units = []
    i = max(next((k for k in range(len(r.spans)) if r.starts[k + 1] > skip), len(r.spans)), 0)
    for k in range(i, len(r.spans)):
        lo, hi = max(skip, r.starts[k]), r.starts[k + 1]
        step = target if hi - lo > 2 * target else max(hi - lo, 1)
        units.extend(_rows_unit(r, [(a, min(a + step, hi))]) for a in range(lo, hi, step))
    return Stream(units, r.total - skip, 0)


def _span_unit(scan: Scan, tasks: list[Any], span: tuple[int, int]) -> Unit:
    def unit() -> pa.Table:
        a, b = span
        with translate_missing(scan.dataset):
            table = reader.read_span(scan.query, tasks[a:b])
        return reader.combine([table], tasks[a], _permute(scan))

    return unit


def rank_rows(scan: Any, worker: int | None = None, workers: int | None = None) -> int:
    """Rows of the rank's epoch (of worker ``worker`` of ``workers`` when given), counted, not read."""
    if is_virtual(scan):
        ranges = sampling.rank_ranges(virtual_rows(scan).total, scan.shard_)
        if workers is not None and worker is not None:
            ranges = sampling.part_ranges(ranges, worker, workers)
        return sampling.length(ranges)
    if workers is not None and worker is not None:
        return sum(scan.task_rows(scan.split(worker, workers)))
    return sum(scan.task_rows(scan.plan()))


def worker_chunks(
    scan: Any, worker: int, workers: int, convert: Callable[[pa.Table], T], skip: int = 0
) -> Iterator[Any]:
    """A plain DataLoader worker's disjoint share of the rank's rows, as converted chunks, its first ``skip``
    rows dropped (a worker's own resumption state: torchdata's StatefulDataLoader keeps one per worker)."""
    if is_virtual(scan):
        rows = virtual_rows(scan)
        ranges = sampling.part_ranges(sampling.rank_ranges(rows.total, scan.shard_), worker, workers)
        return sampling.read_units(sampling.units(rows, sampling.sub_ranges(ranges, skip)), convert)
    return scan.iter_chunks(scan.split(worker, workers), skip_rows=skip, convert=convert)  # type: ignore[no-any-return]


def _rows_unit(rows_reader: Any, ranges: list[tuple[int, int]], order: np.ndarray | None = None) -> Unit:
    def unit() -> pa.Table:
        pieces = [p for a, b in ranges for p in rows_reader.rows(a, b)]
        table = pa.concat_tables(pieces).combine_chunks() if pieces else None
        if table is None:
            raise DalError("internal: an empty unit")
        return table.take(pa.array(order)) if order is not None else table

    return unit


def _permute(scan: RowSource) -> tuple[int, int] | None:
    return (scan.shuffle_[0], scan.epoch) if scan.shuffle_ is not None else None


def canonical_stream(scan: RowSource, canonical: int, rank: int, world: int, batch_size: int, skip: int) -> Stream[Any]:
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
    whole = scan if scan.shard_ is None else replace(scan, shard_=None)
    rows_reader: Any
    if not is_plain(whole):
        rows_reader = virtual_rows(whole)
        chunk = reader.chunk_rows(whole.query)
    else:
        tasks = whole.plan()
        counts = whole.task_rows(tasks)
        rows_reader = reader.RowReader(whole.query, tasks, whole.chunk_spans(tasks), counts, _permute(whole))
        chunk = reader.chunk_rows(whole.query)
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
        units.append(_rows_unit(rows_reader, ranges, _step_major(sizes, micro)))
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
