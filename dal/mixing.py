"""Mixing: one stream drawing from several scans (datasets, or versions of one) in given proportions.

    web = dal.open("text.web", "prod").scan().select("text", "label")
    books = dal.open("text.books", 3).scan().select("text", "label").sample(0.5, seed=1)
    data = dal.mix([web, books], weights=[0.7, 0.3], seed=7).shard(rank, world).to_torch(256)

Each scan keeps its projection, filters, window, shuffle and sample; their selected columns must agree
(names and types). An epoch of the mix takes exactly ``n_i`` rows from scan i (``weights`` apportioned
by largest remainder) in a uniformly random interleave seeded by (seed, epoch): block by block (one
multivariate hypergeometric draw per block of ``chunk`` rows, then a seeded permutation inside the
block), so any position is found without materialising the epoch. The epoch's length:

- ``stop="shortest"`` (default): until the first scan runs out (no row repeats);
- ``stop="longest"``: until the last one does, the others starting over (their same epoch order);
- ``rows=N``: exactly N rows, scans starting over as needed.

A mix is a virtual row source (``dal.read.sampling.Rows``) like a scan, so ``shard`` (equal rows per rank),
DataLoader workers, ``state_dict`` resumption and ``num_canonical_shards`` work on it as on a scan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.errors import FilterError, check_int
from dal.feeds import Feeds
from dal.read import reader, sampling
from dal.read.mixed import MIX_TAG, Mixed, MixRows
from dal.read.sharding import Remainder
from dal.read.source import Source
from dal.scan import Scan

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MIX_TAG", "Mix", "MixRows", "mix"]


def mix(
    scans: Sequence[Any],
    weights: Sequence[float] | None = None,
    *,
    seed: int = 0,
    stop: str = "shortest",
    rows: int | None = None,
) -> Mix:
    """One stream drawing from ``scans`` in proportion to ``weights`` (default: equal); see ``dal.mixing``.

    Args:
        scans: The Scans (or Datasets) to draw from.
        weights: Relative share of each (default: equal).
        seed: Seed of the interleaving (epochs differ).
        stop: ``shortest`` (the epoch ends when a member runs out) or ``longest`` (members start over until the last runs out).
        rows: Rows per epoch (default: set by ``stop``).

    Raises:
        DalError: no scans, a sharded member, weights not one positive number per scan, a bad ``stop``
            or ``rows``, or selected columns that disagree between scans (named) — before any read."""
    members = _members(scans)
    ws = _weights(weights, members)
    seed = check_int(seed, "mix seed", minimum=0, maximum=2**63 - 1)
    rows = _length(stop, rows)
    _check_schemas(members)
    return Mix(tuple(members), ws, seed, stop if rows is None else "rows", rows)


def _members(scans: Sequence[Any]) -> list[Scan]:
    """The scans to mix (a Dataset: its whole-version scan), none sharded."""
    if isinstance(scans, Scan) or not isinstance(scans, list | tuple) or not scans:
        raise FilterError("mix needs a non-empty list of scans")
    members = []
    for i, s in enumerate(scans):
        s = s.scan() if hasattr(s, "scan") and not isinstance(s, Scan) else s
        if not isinstance(s, Scan):
            raise FilterError(f"mix: item {i} is a {type(s).__name__}, not a dal Scan")
        if s.shard_ is not None:
            raise FilterError(f"mix: scan {i} ({s.dataset.name}) is sharded; shard the mix instead")
        members.append(s)
    return members


def _weights(weights: Sequence[float] | None, members: list[Scan]) -> tuple[float, ...]:
    """One positive number per member (default: equal), normalised to sum to 1."""
    if weights is None:
        weights = [1.0] * len(members)
    if isinstance(weights, np.ndarray) and weights.ndim == 1:
        weights = weights.tolist()
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence) or len(weights) != len(members):
        n = len(weights) if isinstance(weights, Sequence) else weights
        raise FilterError(f"mix: {len(members)} scans but weights {n!r}: give one weight per scan")
    ws = [sampling._number(w, f"mix weight {i}") for i, w in enumerate(weights)]
    for i, w in enumerate(ws):
        if w <= 0:
            raise FilterError(f"mix weight {i} ({members[i].dataset.name}) must be > 0, not {w}")
    top = max(ws)
    ws = [w / top for w in ws]  # 1e308 + 1e308 is inf: normalise by the largest first
    total = sum(ws)
    return tuple(w / total for w in ws)


def _length(stop: str, rows: int | None) -> int | None:
    """``rows`` checked against ``stop`` (one of them sets the epoch's length)."""
    if rows is not None:
        rows = check_int(rows, "mix rows", minimum=1, maximum=sampling.MAX_DRAW)
        if stop != "shortest":
            raise FilterError(f"mix: rows={rows} sets the epoch's length; stop={stop!r} cannot also (pass one)")
    elif stop not in ("shortest", "longest"):
        raise FilterError(f"mix stop must be 'shortest' or 'longest' (or pass rows=N), not {stop!r}")
    return rows


def _check_schemas(members: list[Scan]) -> None:
    first = members[0]
    names = first.output_names
    for i, s in enumerate(members[1:], start=1):
        theirs = s.output_names
        missing = [n for n in names if n not in theirs] or [n for n in theirs if n not in names]
        if missing:
            raise FilterError(
                f"mix: scan {i} ({s.dataset.name}) {'lacks' if missing[0] in names else 'adds'} column "
                f"{missing[0]!r}; select the same columns in every scan (scan 0: {names})"
            )
        for n in names:
            a, b = first.arrow_schema.field(n).type, s.arrow_schema.field(n).type
            if not a.equals(b):
                raise FilterError(
                    f"mix: column {n!r} is {a} in scan 0 ({first.dataset.name}) but {b} in scan {i} ({s.dataset.name})"
                )
            fa, fb = first.dataset.schema.get(n), s.dataset.schema.get(n)
            ca = (getattr(fa, "codec", None), getattr(fa, "dtype", None), getattr(fa, "shape", None))
            cb = (getattr(fb, "codec", None), getattr(fb, "dtype", None), getattr(fb, "shape", None))
            if ca != cb:
                raise FilterError(
                    f"mix: tensor field {n!r} is {ca} in scan 0 ({first.dataset.name}) but {cb} in scan {i} "
                    f"({s.dataset.name})"
                )


@dataclass(frozen=True)
class Mix(Feeds):
    """A plan for reading several scans as one stream; nothing is read until a terminal call. Its terminals
    hand the read engine one frozen value (``dal.read.mixed.Mixed``); decoding and TensorFlow specs use the
    first scan's schema (the others agree on the selected columns)."""

    scans: tuple[Scan, ...]
    weights: tuple[float, ...]
    seed: int
    stop: str
    rows: int | None
    shard_: tuple[int, int, Remainder] | None = None
    epoch: int = 0

    @property
    def dataset(self) -> Any:
        """The first scan's pinned version."""
        return self.scans[0].dataset

    @property
    def arrow_schema(self) -> pa.Schema:
        """The first scan's Arrow schema."""
        return self.scans[0].arrow_schema

    @property
    def output_names(self) -> list[str]:
        """The columns the mix yields, in order."""
        return self.scans[0].output_names

    @property
    def name(self) -> str:
        return "mix(" + ", ".join(f"{s.dataset.name}@{s.dataset.number}" for s in self.scans) + ")"

    @cached_property
    def _source(self) -> Mixed:
        """This mix as the read engine's frozen value: its members' sources interleaved."""
        members = tuple(s._source for s in self.scans)
        return Mixed(
            sources=members, weights=self.weights, seed=self.seed, stop=self.stop, rows=self.rows,
            shard=self.shard_, epoch=self.epoch,
        )  # fmt: skip

    def _feed(self) -> Source:
        return self._source

    # -- builder -------------------------------------------------------------------------------------

    def shard(self, rank: int, world_size: int, remainder: Remainder = "pad") -> Mix:
        """This rank's share of the mixed stream (equal rows per rank by default; see ``Scan.shard``).

        Args:
            rank: This process's rank.
            world_size: The number of ranks.
            remainder: ``pad`` (equal rows: some repeated), ``drop`` (equal rows: the rest dropped) or ``keep``.
        """
        checked = self.scans[0].shard(rank, world_size, remainder)
        return replace(self, shard_=checked.shard_)

    def set_epoch(self, epoch: int) -> Mix:
        """The mix for another epoch (new draws and interleaving).

        Args:
            epoch: The epoch number.
        """
        return replace(self, epoch=check_int(epoch, "epoch", minimum=0, maximum=2**63 - 1))

    # -- reading -------------------------------------------------------------------------------------

    def epoch_rows(self) -> MixRows:
        """This epoch's mixed stream as virtual rows (every rank's: ``shard`` cuts it)."""
        return self._source.epoch_rows()

    def count(self) -> int:
        """Rows of one epoch of this rank's mixed stream."""
        return self._source.count()

    def iter_chunks(self, tasks: None = None, *, skip_rows: int = 0, convert: Any = None) -> Iterator[Any]:
        """The rank's mixed rows as chunks (tables of the selected columns), the first ``skip_rows`` dropped.

        Args:
            tasks: Must be None (a mix plans its own members).
            skip_rows: Drop the first rows (resuming).
            convert: Applied to each chunk on the reading thread.
        """
        return self._source.iter_chunks(tasks, skip_rows=skip_rows, convert=convert)

    def iter_batches(self, batch_size: int = 65_536, *, num_epochs: int = 1) -> Iterator[pa.RecordBatch]:
        """Record batches of exactly ``batch_size`` rows of the mixed stream (the last may be shorter).

        Args:
            batch_size: Rows per batch.
            num_epochs: Epochs to read in a row.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
        num_epochs = check_int(num_epochs, "num_epochs", minimum=0)
        for e in range(num_epochs):
            yield from reader.rebatch(self.set_epoch(self.epoch + e).iter_chunks(), batch_size)

    def to_arrow(self) -> pa.Table:
        """One epoch of the mixed stream as one Arrow table."""
        chunks = list(self.iter_chunks())
        if not chunks:
            return pa.Table.from_batches([], schema=self.schema())
        return pa.concat_tables(chunks)

    def to_pandas(self) -> pd.DataFrame:
        """One epoch of the mixed stream as a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def schema(self) -> pa.Schema:
        """The mixed stream's schema (the first scan's fields of the selected columns; nullable where any
        scan's is: a non-nullable column of one dataset mixed with a nullable one holds nulls)."""
        return self._source.schema()
