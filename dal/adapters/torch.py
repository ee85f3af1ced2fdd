"""PyTorch: a scan as a ``torch.utils.data.IterableDataset`` that splits rows between ranks AND workers.

    ds = dal.open("weather.radar", "prod")
    data = ds.shuffle(seed=1).to_torch(batch_size=256)      # rank from torch.distributed when initialised
    for epoch in range(3):
        data.set_epoch(epoch)
        for batch in data: ...                               # dict: column -> tensor (or list of str)

The fast path is iterating the dataset itself (or ``DataLoader(data, batch_size=None)``): chunks of tens
of thousands of rows are read, decoded and converted to tensors once on reader threads, and batches are
slices of them. ``data.loader(num_workers=2)`` runs the reading in DataLoader worker processes (for heavy
transforms): workers ship whole chunks and the main process slices batches, in the same order as
without workers. A plain ``DataLoader(data, batch_size=None, num_workers=k)`` works too (each worker
reads a disjoint share of the rank's rows).

Ranks: ``.shard(rank, world_size)`` names them; without it the rank is the process's (``implicit_rank``):
torch.distributed's when its process group is initialised, else torchrun's ``RANK`` / ``WORLD_SIZE``
environment. It is taken when the data is read, not when ``to_torch`` is called (so ``to_torch`` may come
before ``init_process_group``), and DataLoader workers of every start method (fork, spawn, forkserver) read
as the process that started them: a dataset pickled to spawn/forkserver workers carries that rank along.

Every rank reads the same number of rows (``Scan.shard``'s default ``remainder="pad"``) and yields the
same number of batches, so collective steps never wait on a rank that ran out. Rows never repeat.

Resumption: ``state_dict()`` / ``load_state_dict()`` (the pinned version, seed, epoch, rows consumed);
the next iteration yields exactly the rows not yet seen in that epoch, re-reading only the chunk it
stopped in. torchdata's ``StatefulDataLoader(data, batch_size=None, num_workers=k)`` works too (inside
its workers each worker's state counts the rows of that worker's share). With ``num_canonical_shards``
the order is elastic (see ``dal.read.feed``): the same global order at any world size and worker count, and
a checkpoint resumes at another world size.

Why one module: one ``IterableDataset`` and its map-style sibling: the rank/worker split, start-method
capture, resumption state and batch assembly are one contract tested together (the rank matrix).
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.adapters.arrays import check_nulls, matrix, no_null_value, nulls_error, numeric_list, rows
from dal.errors import DalError, check_int, require, translating
from dal.read import feed, reader

if TYPE_CHECKING:
    from dal.read.source import Source
    from dal.read.transform import TransformSpec

_torch = require("torch", "torch")
_data = require("torch.utils.data", "torch")
_collate = require("torch.utils.data._utils.collate", "torch")

Transform = Callable[[pa.RecordBatch], "pa.RecordBatch | Any"]
UNITS_PER_MESSAGE = 2  # chunks a Loader worker converts and ships together
Columns = dict[str, Any]
_log = logging.getLogger("dal.torch")


def implicit_rank() -> tuple[int, int] | None:
    """(rank, world size) of this process when a scan names no ``.shard``: torch.distributed's, when its
    process group is initialised; else torchrun's ``RANK`` and ``WORLD_SIZE`` environment variables, when
    both are set (a launch whose process group is not initialised yet, or a DataLoader worker of one); None
    (every row) otherwise.

    Raises:
        DalError: ``RANK`` / ``WORLD_SIZE`` set but not a rank of a world size."""
    dist = _torch.distributed
    if dist.is_available() and dist.is_initialized():
        rank, world = int(dist.get_rank()), int(dist.get_world_size())
    else:
        env = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        if env[0] is None or env[1] is None:
            return None
        try:
            rank, world = int(env[0]), int(env[1])
        except ValueError:
            rank, world = -1, -1
        if world < 1 or not 0 <= rank < world:
            raise DalError(
                f"RANK={env[0]!r} and WORLD_SIZE={env[1]!r} in the environment are not a rank of a world size; "
                "fix them, or name the shard: scan.shard(rank, world_size)"
            )
    return rank, world


class TorchDataset(_data.IterableDataset):  # type: ignore[misc,name-defined]
    """Batches of one pinned version as dicts of tensors; see the module docstring.

    Args:
        scan: what to read (projection, filters, window, shuffle; a ``shard`` if ranks are not taken
            from torch.distributed).
        batch_size: rows per batch (the last batch of an epoch may be shorter).
        transform: a ``dal.TransformSpec`` (its function sees each chunk decoded; see ``dal.read.transform``),
            or a function over each chunk as stored (an Arrow batch of whole row groups) returning an
            Arrow batch or a pandas DataFrame, declared in ``output_schema``.
        output_schema: the columns and Arrow types a plain-function ``transform`` returns (checked on every chunk).
        num_canonical_shards: elastic order (see ``dal.read.feed``): a multiple of every world size to run at.
        device: ``"cuda"`` (or ``"cuda:1"``) copies each batch through pinned memory on a side stream;
            ``"cpu"``/None leaves tensors in host memory.

    Raises:
        DalError: a transform without output_schema, a CUDA device without CUDA.
    """

    def __init__(
        self,
        scan: Source,
        batch_size: int = 256,
        *,
        transform: TransformSpec | Transform | None = None,
        output_schema: pa.Schema | None = None,
        num_canonical_shards: int | None = None,
        device: str | None = None,
    ) -> None:
        super().__init__()
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
        self._bound: Any = None  # dal.read.transform: the transform checked against the scan, before any read
        if transform is not None or output_schema is not None:
            from dal.read import transform as transforms

            self._bound = transforms.bind(transform, output_schema, scan)
        if num_canonical_shards is not None:
            num_canonical_shards = check_int(num_canonical_shards, "num_canonical_shards", minimum=1)
        self.device = _device(device)
        # resolve the version's files, schema and row groups here, in the main process: delta-rs (tokio)
        # panics in forked DataLoader workers (tokio-rs/tokio#4301); workers then only touch pyarrow
        scan.plan()
        # a null an int/bool/timestamp tensor cannot hold: refused now, not mid-epoch (footer statistics).
        # Through a transform only the columns a function-less TransformSpec passes on as stored (a function
        # may replace nulls: what it returns is checked chunk by chunk)
        names = scan.output_names
        if self._bound is not None:
            from dal.read.transform import TransformSpec

            spec, given = self._bound.transform, {f.name: f for f in self._bound.inputs}
            plain_spec = isinstance(spec, TransformSpec) and spec.func is None
            names = [f.name for f in self._bound.fields if plain_spec and given.get(f.name) == f]
        schema = scan.dataset.schema
        check_nulls(scan, {
            n: str(typ) for n in names
            if no_null_value(typ := scan.arrow_schema.field(n).type)
            and getattr(schema.get(n), "codec", None) in (None, "scalar")
        })  # fmt: skip
        self.source = scan  # the frozen read source (dal.read.source) a Scan or a Mix handed down
        self.batch_size = batch_size
        self.transform = transform
        self.output_schema = output_schema
        self.num_canonical_shards = num_canonical_shards
        self.epoch = scan.epoch
        self._consumed = 0  # rows of this epoch handed out by iterating this object in this process
        self._token = os.urandom(8).hex()  # names this dataset's batches coming out of DataLoader workers
        self._resume = 0  # rows (elastic: of each canonical shard) to skip on the next iteration

    def set_epoch(self, epoch: int) -> None:
        """Use another epoch's order (call before each epoch when shuffling, as with DistributedSampler)."""
        epoch = int(epoch)
        if epoch != self.epoch:
            self._consumed = self._resume = 0
        self.epoch = epoch

    def rank_source(self) -> Source:
        """The source for this process: its shard from ``.shard``, else this process's rank (``implicit_rank``;
        inside a DataLoader worker: the rank of the process that started it), at this epoch."""
        scan = self.source
        if scan.shard is None:
            rank = self._implicit()
            if rank is not None:
                scan = scan.with_shard((*rank, "pad"))
        return scan.with_epoch(self.epoch)

    def _implicit(self) -> tuple[int, int] | None:
        sent = self.__dict__.get("_sent")
        if sent is not None and _data.get_worker_info() is not None:
            # a spawn/forkserver DataLoader worker: a fresh interpreter without the process group; the
            # rank is the one the main process had when it sent this copy (__getstate__)
            return sent[0]  # type: ignore[no-any-return]
        return implicit_rank()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a worker process (spawn / forkserver DataLoader workers): the rank travels along."""
        state = dict(self.__dict__)
        state["_sent"] = (implicit_rank() if self.source.shard is None else None,)
        return state

    def _rank(self) -> tuple[int, int]:
        scan = self.rank_source()
        return (scan.shard[0], scan.shard[1]) if scan.shard is not None else (0, 1)

    # -- resumption ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is: the pinned version, what decides its rows (seed, filters and window, columns,
        shard), the epoch and the rows consumed (a plain dict).

        Raises:
            DalError: in the main process of a plain ``DataLoader(data, num_workers=k)``, whose workers
                read the rows: this process cannot know how far they got (use ``data.loader(num_workers=k)``
                or torchdata's ``StatefulDataLoader``, whose state holds each worker's)."""
        info = _data.get_worker_info()
        if info is None and self._token in _READ_BY_WORKERS:
            raise DalError(
                f"state_dict() of {self.source.dataset.name} cannot say where its epoch is: the last pass was read by "
                "plain DataLoader worker processes, which this process cannot see (it would say 0 rows, and a "
                "resume would repeat them); use data.loader(num_workers=k), or torchdata's "
                "StatefulDataLoader(data, batch_size=None, num_workers=k) and its state_dict()"
            )
        rows = self._resume + self._consumed
        if self.num_canonical_shards is not None:
            _rank, world = self._rank()
            owned = self.num_canonical_shards // world
            rows = self._resume + self._consumed // owned  # rows of each canonical shard
        state = feed.make_state(self.rank_source(), self.num_canonical_shards, feed.Position(self.epoch, rows))
        if info is not None and info.num_workers > 1:  # rows of this worker's share (a plain DataLoader's)
            state["worker"] = [info.id, info.num_workers]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()``: the next iteration yields the epoch's rows not yet consumed.

        Raises:
            DalError: the state is of another dataset, version, seed, or (without canonical shards)
                another rank/world size."""
        pos = feed.check_state(self.rank_source(), state, self.num_canonical_shards)
        info = _data.get_worker_info()
        here = [info.id, info.num_workers] if info is not None and info.num_workers > 1 else None
        if isinstance(state, dict) and state.get("worker") != here:
            raise DalError(
                f"cannot resume {self.source.dataset.name}: the state was saved in DataLoader worker "
                f"{state.get('worker')} (as [worker, workers]), this is {here or 'the main process'}"
            )
        self.epoch, self._resume, self._consumed = pos.epoch, pos.rows, 0

    # -- the stream --------------------------------------------------------------------------------

    def _stream(self, skip: int) -> feed.Stream:
        scan = self.rank_source()
        if self.num_canonical_shards is None:
            return scan.rank_stream(skip)
        rank, world = self._rank()
        return feed.canonical_stream(scan, self.num_canonical_shards, rank, world, self.batch_size, skip)

    def num_batches(self, num_workers: int = 0) -> int:
        """Batches this rank yields per epoch (``num_workers``: of a plain DataLoader over this dataset)."""
        scan = self.rank_source()
        if self.num_canonical_shards is not None or num_workers <= 1:
            if self.num_canonical_shards is not None:
                rows = self._stream(0).rows
            else:
                rows = scan.rank_rows()
            return -(-rows // self.batch_size)
        total = 0
        for w in range(num_workers):
            rows = scan.rank_rows(w, num_workers)  # counted (filter columns only), not read
            total += -(-rows // self.batch_size)
        return total

    def convert(self, table: pa.Table) -> tuple[int, Columns]:
        """One chunk as (rows, columns): tensor fields decoded, each column converted once (zero-copy
        where Arrow allows); strings as NumPy object arrays (lists per batch)."""
        if self._bound is not None:  # dal.read.transform: the declared fields, checked, tensor fields decoded
            n, decoded = self._bound.apply(table)
            return n, {name: _tensor(values) for name, values in decoded.items()}
        else:
            schema = self.source.dataset.schema
            for name in table.column_names:
                typ = table.schema.field(name).type
                if no_null_value(typ) and table.column(name).null_count:
                    # NumPy would turn this chunk's ints into float64 with NaN (timestamps into INT64_MIN,
                    # bools into objects) while chunks without nulls stay int64: refuse, as to_tf does
                    raise nulls_error(self.source.dataset.name, name, str(typ))
            arrays = [
                n
                for n in table.column_names
                if numeric_list(table.schema.field(n).type)
                and getattr(schema.get(n), "codec", None) in (None, "scalar")
            ]
            decoded = self.source.dataset.decode(table.drop_columns(arrays))
            for n in arrays:  # numeric arrays: one (rows, n) tensor when of one length, else one per row
                m = matrix(table.column(n))
                decoded[n] = rows(table.column(n)) if m is None else m
            decoded = {n: decoded[n] for n in table.column_names}
        return table.num_rows, {name: _tensor(values) for name, values in decoded.items()}

    def _chunks(self, units: list[feed.Unit]) -> Iterator[tuple[int, Columns]]:
        """Units read, decoded and converted on reader threads, in order, a few ahead."""
        return reader.prefetch(
            reader.ordered_map(lambda i: self.convert(units[i]()), len(units), 3), reader.PREFETCH_CHUNKS
        )

    @translating("reading {self.source.dataset.name} version {self.source.dataset.number}")
    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = _data.get_worker_info()
        if info is not None and info.num_workers > 1:
            yield from self._worker_batches(info.id, info.num_workers)
            return
        if info is None:
            _READ_BY_WORKERS.pop(self._token, None)  # read here: state_dict() knows where it is
        skip, self._consumed = self._resume, 0
        if self.num_canonical_shards is None:  # one pyarrow scanner streams the rank's chunks
            chunks = self.rank_source().iter_chunks(skip_rows=skip, convert=self.convert)
        else:
            chunks = self._chunks(self._stream(skip).units)
        batches = feed.split_batches(chunks, self.batch_size, _take, _join, _split)
        for n, batch in _to_device(batches, self.device):
            self._consumed += n
            yield batch if info is None else _Shipped(batch, self._token, self._sender(1))  # a DataLoader's one worker
        self._resume, self._consumed = 0, 0  # the epoch is over: a state saved now starts the next one

    def _worker_batches(self, worker: int, workers: int) -> Iterator[dict[str, Any]]:
        """Inside a plain DataLoader worker: a disjoint share of the rank's rows (equal across ranks)."""
        scan = self.rank_source()
        if self.num_canonical_shards is not None:
            raise DalError(
                "num_canonical_shards needs the batches counted in the main process: "
                "use data.loader(num_workers=...) instead of DataLoader(data, num_workers=...)"
            )
        skip, self._consumed = self._resume, 0  # skip: a worker's own state (StatefulDataLoader keeps one per worker)
        reader.read_on_caller()  # this process is a worker: read on this thread (the workers overlap each other)
        chunks = scan.worker_chunks(worker, workers, self.convert, skip)
        sender = self._sender(workers)
        for n, batch in feed.split_batches(chunks, self.batch_size, _take, _join, _split):
            self._consumed += n
            yield _Shipped(_batch(batch), self._token, sender)  # through the worker's pipe as one bytes object
        self._resume, self._consumed = 0, 0

    def _sender(self, workers: int) -> tuple[str, int, int]:
        """What a plain DataLoader worker's batches name: the dataset, this process, the workers."""
        return (f"{self.source.dataset.name} version {self.source.dataset.number}", os.getpid(), workers)

    def loader(self, num_workers: int = 0, **kwargs: Any) -> Loader:
        """Batches read by ``num_workers`` DataLoader worker processes shipping whole chunks (the main
        process slices them: same batches, same order as without workers), resumable by ``state_dict``.
        ``kwargs`` go to ``torch.utils.data.DataLoader`` (e.g. ``multiprocessing_context``)."""
        return Loader(self, check_int(num_workers, "num_workers", minimum=0), kwargs)


class _Units(_data.IterableDataset):  # type: ignore[misc,name-defined]
    """What ``Loader``'s workers iterate: the converted chunks i ≡ worker (mod workers), in order. The pass
    to read (epoch, rows to skip, pass number) comes through shared memory, so persistent workers serve
    every epoch. Each worker packs each chunk into one of ``slots`` shared-memory buffers it reuses: a
    buffer travels (one file-descriptor hand-over) until the main process records its generation in
    ``known``, then only the layout does (a fresh segment per chunk costs that hand-over and the kernel
    zeroing its pages, ~30x the copy). The main process copies a chunk out and counts it in ``copied``
    before the worker may write that buffer again."""

    def __init__(self, owner: TorchDataset, num_workers: int, slots: int) -> None:
        super().__init__()
        self.owner, self.slots = owner, slots
        self.position = _torch.zeros(3, dtype=_torch.int64).share_memory_()  # (epoch, skip, pass) of the next pass
        self.copied = _torch.zeros(max(num_workers, 1), dtype=_torch.int64).share_memory_()  # chunks copied, per worker
        # generation of the buffer the main process holds for each (worker, slot); 0: none yet
        self.known = _torch.zeros((max(num_workers, 1), slots), dtype=_torch.int64).share_memory_()

    def _chunks(self, worker: int, workers: int, skip: int) -> Iterator[tuple[int, Columns]]:
        """Messages i ≡ worker (mod workers), each UNITS_PER_MESSAGE consecutive units read one at a time
        (pyarrow decodes each one's columns on threads) and converted together. Reading ahead inside every
        worker measured slower on few cores (more threads than cores; the workers already overlap), and
        two units per message cut the per-message cost (queue hand-offs contending for the GIL) by half."""
        units = self.owner._stream(skip).units
        groups = [units[j : j + UNITS_PER_MESSAGE] for j in range(0, len(units), UNITS_PER_MESSAGE)]

        def read(group: list[feed.Unit]) -> pa.Table:
            tables = [unit() for unit in group]
            return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

        return (self.owner.convert(read(groups[i])) for i in range(worker, len(groups), workers))

    @translating("reading {self.owner.source.dataset.name} version {self.owner.source.dataset.number}")
    def __iter__(self) -> Iterator[tuple[int, int, int, Any]]:
        info = _data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        epoch, skip, current = (int(x) for x in self.position)
        self.owner.epoch = epoch
        ring: list[Any] = self.__dict__.setdefault("_ring", [None] * self.slots)  # this process's buffers
        for seq, (n, columns) in enumerate(self._chunks(worker, workers, skip)):
            # the buffer is free once the main process copied the chunk `slots` before; a new pass (the
            # main process dropped this one's chunks unread) frees every buffer
            wait = 0.0001
            while seq - int(self.copied[worker]) >= self.slots and int(self.position[2]) == current:
                time.sleep(wait)  # rare: DataLoader's prefetch_factor keeps fewer chunks than slots in flight
                wait = min(2 * wait, 0.005)
            slot = seq % self.slots
            layout, rest = _pack_into(columns, ring, slot)
            # a buffer travels (one shared-memory handle) the first time it is used in a pass, else only
            # its layout: no file descriptor per chunk
            buffer, generation = ring[slot]
            yield (
                worker,
                seq,
                n,
                (layout, buffer if int(self.known[worker, slot]) != generation else None, rest, generation),
            )


class Loader:
    """``TorchDataset.loader``: DataLoader workers read and convert whole chunks; batches are sliced here.
    The workers persist across epochs (no fork per epoch) unless ``persistent_workers=False`` is passed."""

    def __init__(self, data: TorchDataset, num_workers: int, kwargs: dict[str, Any]) -> None:
        self.data, self.num_workers, self.kwargs = data, num_workers, kwargs
        self._units: _Units | None = None
        self._loader: Any = None
        self._rank: tuple[int, int] | None = None  # the implicit rank its workers were started with

    def state_dict(self) -> dict[str, Any]:
        return self.data.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.data.load_state_dict(state)

    def set_epoch(self, epoch: int) -> None:
        self.data.set_epoch(epoch)

    def __len__(self) -> int:
        return self.data.num_batches()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        data = self.data
        if self.num_workers == 0:
            yield from data
            return
        _READ_BY_WORKERS.pop(data._token, None)
        skip, data._consumed = data._resume, 0
        rank = data._implicit() if data.source.shard is None else None
        if self._loader is not None and rank != self._rank:
            self._loader = None  # persistent workers started as another rank (before init_process_group)
        self._rank = rank
        if self._loader is None:
            options = {"persistent_workers": True, **self.kwargs}
            slots = int(options.get("prefetch_factor") or 2) + 1  # DataLoader's chunks in flight per worker, +1
            self._units = _Units(data, self.num_workers, slots)
            self._loader = _data.DataLoader(self._units, batch_size=None, num_workers=self.num_workers, **options)
        units = self._units
        assert units is not None
        units.copied.zero_()
        self._buffers = getattr(self, "_buffers", {})  # kept across passes: each buffer is sent once
        units.position[0], units.position[1], units.position[2] = data.epoch, skip, units.position[2] + 1
        # DataLoader hands worker outputs out round-robin: unit i comes from worker i mod k, so the
        # chunks arrive in stream order
        chunks = _copied_out(iter(self._loader), units, self._buffers)
        batches = feed.split_batches(chunks, data.batch_size, _take, _join, _split)
        for n, batch in _to_device(batches, data.device):
            data._consumed += n
            yield batch
        data._resume, data._consumed = 0, 0


def _copied_out(
    chunks: Iterator[tuple[int, int, int, Any]], units: _Units, buffers: dict[tuple[int, int], Any]
) -> Iterator[tuple[int, Columns]]:
    """Chunks from ``_Units`` workers copied out of their shared buffers (one memcpy per chunk), each
    buffer handed back (``copied``) at once."""
    for worker, seq, n, (layout, buffer, rest, generation) in chunks:
        slot = seq % units.slots
        if buffer is not None:  # (worker, slot) -> (generation, that worker's shared buffer)
            buffers[(worker, slot)] = (generation, buffer)
            units.known[worker, slot] = generation
        held, buffer = buffers[(worker, slot)]
        if held != generation:
            raise DalError(f"internal: worker {worker} buffer {slot} is generation {generation}, held {held}")
        end = max((p[0] + p[1] for p in layout.values() if p is not None), default=0)
        # NumPy's memcpy: torch's copy may fan out to intra-op threads that are busy with the training step
        out = _torch.from_numpy(buffer[:end].numpy().copy())
        columns = {k: rest[k] if place is None else out[place[0] : place[0] + place[1]].view(place[2]).view(place[3])
                   for k, place in layout.items()}  # fmt: skip
        units.copied[worker] += 1
        yield n, columns


def _pack_into(columns: Columns, ring: list[Any], slot: int) -> tuple[dict[str, Any], Columns]:
    """The tensors of ``columns`` copied into the shared buffer ``ring[slot]`` (grown when too small,
    64-byte aligned; a new buffer gets a new generation number): ``({name: (offset, nbytes, dtype, shape) or
    None}, {name: other value})``."""
    layout: dict[str, Any] = dict.fromkeys(columns)  # every name, in order; None: sent as is
    total = 0
    for k, v in columns.items():
        if isinstance(v, _torch.Tensor):
            layout[k] = (total, v.numel() * v.element_size(), v.dtype, tuple(v.shape))
            total += -(-layout[k][1] // 64) * 64
    if ring[slot] is None or ring[slot][0].numel() < total:  # (buffer, generation): a new one, a new number
        generation = 1 + int.from_bytes(os.urandom(7), "little")  # unique across (restarted) worker processes
        ring[slot] = (_torch.zeros(max(total + total // 4, 64), dtype=_torch.uint8).share_memory_(), generation)
    buffer = ring[slot][0]
    for k, place in layout.items():
        if place is not None:
            a, b, dtype, shape = place
            buffer[a : a + b].view(dtype).view(shape).copy_(columns[k])
    return layout, {k: v for k, v in columns.items() if layout[k] is None}


class Batch(dict):  # type: ignore[type-arg]
    """A batch as ``TorchDataset`` hands it out: a dict of column name -> tensor (or list of str). Its own
    type so that torch's default collate can refuse to stack batches (``DataLoader(data, batch_size=32)``)."""

    def __copy__(self) -> Batch:  # DataLoader's default_convert copies every batch: a dict copy, not a reduce
        return Batch(self)


def _refuse_collate(batch: Any, *, collate_fn_map: Any = None) -> Any:
    raise DalError(
        f"a DataLoader with a batch_size stacks dal's batches into one (here {len(batch)}: a ({len(batch)}, "
        "batch_size) tensor per column), but to_torch(batch_size=...) yields whole batches already: pass "
        "DataLoader(data, batch_size=None)"
    )


# torch's default collate (DataLoader with a batch_size, also in its workers) looks its element's type up here
_COLLATE_FNS = getattr(_collate, "default_collate_fn_map", None)
if isinstance(_COLLATE_FNS, dict):
    _COLLATE_FNS[Batch] = _refuse_collate

# main process: tokens of the datasets whose last pass came out of plain DataLoader workers (their state is
# in the workers, so the dataset's state_dict() here would be wrong)
_READ_BY_WORKERS: dict[str, bool] = {}


class _Shipped(Batch):
    """A batch leaving a plain DataLoader worker. torch sends each tensor through a new shared-memory
    segment and a file-descriptor hand-over (~1 ms); a batch of a few tens of kB travels faster through the
    worker's pipe: pickled as ONE bytes object holding every tensor column, unpickled as a plain dict. It
    names its dataset (``token``), so that the main process knows that dataset was read by workers."""

    def __init__(self, columns: dict[str, Any], token: str, sender: tuple[str, int, int] = ("", 0, 0)) -> None:
        super().__init__(columns)
        self.token = token
        self.sender = sender  # (dataset name, worker pid, workers): the main process counts worker processes

    def __copy__(self) -> _Shipped:  # DataLoader's default_convert copies the batch: stay shippable
        return _Shipped(self, self.token, self.sender)

    def __reduce__(self) -> tuple[Any, ...]:
        # CPU tensor columns packed into one bytes object, each at a 64-byte boundary (aligned for every
        # dtype's view): through NumPy where it has the dtype, else as torch bytes; anything else (string
        # lists, CUDA tensors) pickled as it is. The layout is one tuple per column (name, offset, dtype,
        # shape; dtype and shape None: sent as is) and bytes, not a bytearray, travel: pickle writes bytes
        # as they are (a bytearray is copied into bytes first), the main process copies them once into a
        # writable buffer
        parts: list[Any] = []
        layout: list[tuple[Any, ...]] = []  # column order kept
        rest: dict[str, Any] = {}
        total = 0
        for k, v in self.items():
            if not isinstance(v, _torch.Tensor) or not v.is_cpu:
                layout.append((k, 0, None, None))
                rest[k] = v
                continue
            if v.dtype in _NUMPY_DTYPES:
                flat: Any = v.numpy()
                if not flat.flags.c_contiguous:
                    flat = np.ascontiguousarray(flat)
                layout.append((k, total, _NUMPY_STR[flat.dtype], flat.shape))
            else:
                flat = v.contiguous().view(-1).view(_torch.uint8).numpy()
                layout.append((k, total, v.dtype, tuple(v.shape)))
            parts.append(flat)
            total += flat.nbytes
            if total % 64:
                parts.append(_PADS[-total % 64])
                total += -total % 64
        return (_unship, (tuple(layout), b"".join(parts), rest, self.token, self.sender))


# torch dtypes NumPy holds the same bytes for (bfloat16 and the float8s it has not: those go as torch bytes)
_NUMPY_NAMES = "bool uint8 int8 int16 int32 int64 float16 float32 float64 complex64 complex128 uint16 uint32 uint64"
_NUMPY_DTYPES = frozenset(getattr(_torch, name) for name in _NUMPY_NAMES.split() if hasattr(_torch, name))
_NUMPY_STR = {np.dtype(name): np.dtype(name).str for name in _NUMPY_NAMES.split()}  # a lookup, not .str each time
_PADS = [bytes(n) for n in range(64)]


def _unship(
    layout: Any, data: bytes, rest: dict[str, Any], token: str, sender: tuple[str, int, int] = ("", 0, 0)
) -> dict[str, Any]:
    """A shipped batch as a plain dict (collating, if any, happened in the worker): each tensor column a
    view of one writable copy of the bytes received."""
    _READ_BY_WORKERS[token] = True
    if sender[1] and not _HINTED:
        _count_worker(token, sender)
    buffer = bytearray(data)  # writable: a training step may change a batch in place
    out: dict[str, Any] = {}
    for k, offset, dtype, shape in layout:
        if dtype is None:
            out[k] = rest[k]
        elif isinstance(dtype, str):
            out[k] = _torch.from_numpy(np.ndarray(shape, dtype, buffer, offset))
        else:
            raw = np.ndarray((math.prod(shape) * dtype.itemsize,), np.uint8, buffer, offset)  # dtypes NumPy lacks
            out[k] = _torch.from_numpy(raw).view(dtype).view(shape)
    return out


# main process: worker pids seen per dataset token, until the hint below is given (once per process)
_WORKER_PIDS: dict[str, set[int]] = {}
_HINTED: list[bool] = []


def _count_worker(token: str, sender: tuple[str, int, int]) -> None:
    """More worker processes than a DataLoader has shipped this dataset's batches: its workers were started
    again for another pass (``persistent_workers=False``, the default, or a new DataLoader per epoch). Logs
    one line, once per process: what that costs and what to use instead."""
    name, pid, workers = sender
    pids = _WORKER_PIDS.setdefault(token, set())
    pids.add(pid)
    if len(pids) <= workers:
        return
    _HINTED.append(True)
    _WORKER_PIDS.clear()
    _log.warning(
        "DataLoader started %d new worker processes for another pass over %s (persistent_workers=False, or a new "
        "DataLoader per epoch): every epoch forks them and hands them the dataset's plan again, and every batch "
        "crosses a pipe (several times the CPU per row of reading in one process); use data.loader(num_workers=%d), "
        "whose workers persist and ship whole chunks, or DataLoader(..., persistent_workers=True)",
        workers, name, workers,
    )  # fmt: skip


def _take(columns: Columns, a: int, b: int) -> Columns:
    return {k: v[a:b] for k, v in columns.items()}


def _split(columns: Columns, start: int, size: int, count: int) -> Iterator[Columns]:
    """``count`` consecutive batches of ``size`` rows from row ``start``, as ``_take`` gives them one by one;
    when every column is a tensor, each is split once (views, in one call) and a ``Batch`` built directly."""
    end = start + size * count
    if not all(isinstance(v, _torch.Tensor) for v in columns.values()):
        return (_take(columns, a, a + size) for a in range(start, end, size))
    names = list(columns)
    parts = zip(*(v[start:end].split(size) for v in columns.values()), strict=True)
    return (Batch(zip(names, group, strict=True)) for group in parts)


def _join(x: Columns, y: Columns) -> Columns:
    out: Columns = {}
    for k, v in x.items():
        w = y[k]
        if isinstance(v, list) or isinstance(w, list) or (isinstance(v, _torch.Tensor) and v.shape[1:] != w.shape[1:]):
            out[k] = list(v) + list(w)  # arrays of one length in one chunk, of another (or varying) in the next
        elif isinstance(v, np.ndarray):
            out[k] = np.concatenate([v, w])
        elif v.is_cpu and w.is_cpu and v.dtype == w.dtype and v.dtype in _NUMPY_DTYPES:
            # one memcpy per part on this thread: torch.cat copies a batch of images or tensors with OpenMP
            # threads, whose spinning after each copy took the cores from the reader threads (a batch
            # straddling two chunks is joined once per chunk)
            out[k] = _torch.from_numpy(np.concatenate([v.numpy(), w.numpy()]))
        else:
            out[k] = _torch.cat([v, w])
    return out


def _batch(columns: Columns) -> Batch:
    """A batch as handed out: object columns (strings) as lists."""
    if type(columns) is Batch:  # built by _split: tensors only
        return columns
    return Batch({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in columns.items()})


def _device(device: str | None) -> Any:
    if device is None or device == "cpu":
        return None
    if not isinstance(device, str) or not device.startswith("cuda"):
        raise DalError(f"device must be 'cpu' or 'cuda[:N]', not {device!r}")
    if not _torch.cuda.is_available():
        raise DalError(f"device={device!r} but this torch has no CUDA device (torch.cuda.is_available() is False)")
    return _torch.device(device)


def _to_device(batches: Iterator[tuple[int, Columns]], device: Any) -> Iterator[tuple[int, Batch]]:
    """Batches as handed out; on a CUDA device each is copied through pinned memory on a side stream,
    one batch ahead, so the copy overlaps the step using the previous batch."""
    if device is None:
        for n, columns in batches:
            yield n, _batch(columns)
        return
    stream = _torch.cuda.Stream(device=device)
    pending: tuple[int, Batch] | None = None
    for n, columns in batches:
        with _torch.cuda.stream(stream):
            moved = Batch(
                {
                    k: v.pin_memory().to(device, non_blocking=True) if isinstance(v, _torch.Tensor) else v
                    for k, v in _batch(columns).items()
                }
            )
        if pending is not None:
            yield pending
        _torch.cuda.current_stream(device).wait_stream(stream)
        for v in moved.values():
            if isinstance(v, _torch.Tensor):
                v.record_stream(_torch.cuda.current_stream(device))
        pending = (n, moved)
    if pending is not None:
        yield pending


def _tensor(values: Any) -> Any:
    """NumPy -> tensor, once per chunk; strings stay NumPy object arrays (lists per batch); ragged tensor
    fields stay lists of tensors."""
    if isinstance(values, list):
        return [None if v is None else _tensor(v) for v in values]
    if not isinstance(values, np.ndarray):
        return values
    if values.dtype.kind in "OUS":
        return values.astype(object) if values.dtype.kind != "O" else values
    if values.dtype.kind == "M":
        values = values.astype("datetime64[us]").astype(np.int64)  # timestamps as microseconds since epoch
    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    if not values.flags.writeable:
        # the chunk's Arrow buffers belong to this chunk alone: share them instead of copying
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return _torch.from_numpy(values)
    return _torch.from_numpy(values)


class MapDataset(_data.Dataset):  # type: ignore[misc,name-defined]
    """A map-style dataset of one pinned version's rows by position (``dal.read.access``): ``len(ds)``,
    ``ds[i]`` (one row: column -> tensor, or str), ``ds[[i, j, …]]`` / ``ds.batch(indices)`` (one dict of
    batched tensors, rows in that order). ``DataLoader(ds, batch_size=…, sampler=DistributedSampler(ds))``
    works: DataLoader fetches each batch with ``__getitems__`` (one ``take``), and the default collate
    stacks the rows. Positions are the scan's rows in reading order (``to_arrow()``'s order), filters,
    window and deletion vectors applied, the same in every process.

    Cost: ``take`` decodes each row group it touches whole and keeps recently used ones up to ``cache_bytes``
    (256 MiB) per process; a global shuffle (``DistributedSampler(shuffle=True)`` / ``RandomSampler``) over a
    projection larger than that decodes about one row group per row, where the streaming ``to_torch``
    shuffle reads each row group once per epoch (see docs/training.md).

    Raises:
        DalError: a sampled or balanced scan; a null a tensor cannot hold (at conversion).
    """

    def __init__(self, scan: Source, *, cache_bytes: int | None = None) -> None:
        from dal.read.access import CACHE_BYTES, RowIndex

        super().__init__()
        self.index = RowIndex(scan, CACHE_BYTES if cache_bytes is None else cache_bytes)
        self._convert = TorchDataset(self.index.source, 1)  # the streaming path's conversion: the same tensors

    def __len__(self) -> int:
        return len(self.index)

    def batch(self, indices: Any) -> Batch:
        """The rows at ``indices`` as one dict of tensors (``(len(indices), …)`` each).

        Raises:
            IndexError: a position out of range; TypeError: not integers (``RowIndex.positions``)."""
        _rows, columns = self._convert.convert(self.index.take(indices))
        return _batch(columns)

    def __getitem__(self, index: Any) -> Any:
        """One row for one position (a dict of a row's values), a batch for several (see ``batch``).

        Raises:
            IndexError: a position out of range; TypeError: not integers (``RowIndex.positions``)."""
        if np.ndim(index) == 0:  # checked whole by positions(): int(index) made True row 1, a timedelta64 a row
            return {k: v[0] for k, v in self.batch(index).items()}
        return self.batch(index)

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        """What DataLoader's batched fetch asks for: one row dict per index (one ``take`` for them all)."""
        columns = self.batch(indices)
        return [{k: v[j] for k, v in columns.items()} for j in range(len(indices))]
