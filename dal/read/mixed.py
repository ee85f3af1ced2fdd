"""A mix as a read source: several one-version sources interleaved in blocks (``dal.mix`` builds it).

An epoch of the mix takes exactly ``counts[s]`` rows of member s (its weight apportioned by largest remainder,
the epoch's length set by ``stop`` or ``rows``) in a uniformly random interleave seeded by (seed, epoch),
block by block (one multivariate hypergeometric draw per block, then a seeded permutation inside it): any
position is found without materialising the epoch. A ``Mixed`` is a virtual source (``dal.read.source``):
shard, DataLoader workers, resumption and canonical shards apply to its numbering as to a sample's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from dal.errors import DalError
from dal.read import reader, sampling
from dal.read.pinned import Pinned
from dal.read.plan import Query
from dal.read.sharding import wrapped
from dal.read.source import Source, Version
from dal.read.tasks import ReadTask

MIX_TAG = 0x31


@dataclass(frozen=True, kw_only=True)
class Mixed(Source):
    """Several one-version sources (``sources``, unsharded) drawn in proportion to ``weights`` (normalised),
    interleaved by ``seed``; ``stop``: "shortest", "longest" or "rows" (then ``rows`` per epoch). Decoding
    and TensorFlow specs use the first member's schema (the others agree on the selected columns)."""

    sources: tuple[Version, ...]
    weights: tuple[float, ...]
    seed: int
    stop: str
    rows: int | None = None
    WHAT: ClassVar[str] = "a mix"

    @property
    def dataset(self) -> Pinned:
        return self.sources[0].dataset

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.sources[0].arrow_schema

    @property
    def output_names(self) -> list[str]:
        return self.sources[0].output_names

    @property
    def query(self) -> Query:
        return self.sources[0].query

    def members(self) -> tuple[Version, ...]:
        return self.sources

    def schema(self) -> pa.Schema:
        """The mixed stream's schema (the first member's fields of the selected columns; nullable where any
        member's is: a non-nullable column of one dataset mixed with a nullable one holds nulls)."""
        fields = [self.arrow_schema.field(n) for n in self.output_names]
        return pa.schema(
            [
                f.with_nullable(True) if any(s.arrow_schema.field(f.name).nullable for s in self.sources) else f
                for f in fields
            ]
        )

    def identity(self) -> dict[str, Any]:
        """What a loader state records of this mix (resuming checks it): its members' rows too."""
        import json

        out = {
            "dataset": [s.dataset.name for s in self.sources],
            "version": [s.dataset.number for s in self.sources],
            "seed": self.seed,
            "sampling": {
                "kind": "mix",
                "weights": list(self.weights),
                "stop": self.stop,
                "rows": self.rows,
                "members": [[s.shuffle[0] if s.shuffle is not None else None, s.described()] for s in self.sources],
            },
            "members": [s.rows_of() for s in self.sources],
        }
        return json.loads(json.dumps(out))  # type: ignore[no-any-return]

    def plan(self) -> list[ReadTask]:
        """Plans every member (footers and file lists read here, in the calling process) and the epoch's
        counts (an empty member is a DalError here, before any data is read); returns the first member's tasks
        (what TensorFlow's spec peeks at)."""
        plans = [s.plan() for s in self.sources]
        self.epoch_rows()
        return plans[0]

    def epoch_rows(self) -> MixRows:
        """This epoch's mixed stream as virtual rows (every rank's: ``shard`` cuts it)."""
        return MixRows(self, [s.with_epoch(self.epoch).epoch_rows() for s in self.sources])


class MixRows(sampling.Rows):
    """An epoch of a mix: block i holds ``counts[i][s]`` rows of member s, interleaved by a permutation
    seeded by (seed, epoch, i); member s's rows come in its own order, starting over when it runs out."""

    def __init__(self, mix: Mixed, members: list[sampling.Rows]) -> None:
        self.members, self.mix = members, mix
        self.schema = mix.schema()
        self.columns = mix.output_names
        totals = [m.total for m in members]
        for i, t in enumerate(totals):
            if t == 0:
                s = mix.sources[i]
                raise DalError(f"mix: scan {i} ({s.dataset.name} version {s.dataset.number}) has no rows this epoch")
        w = mix.weights
        if mix.rows is not None:
            n = sampling.apportion(mix.rows, w)
        else:
            ratios = [t / x for t, x in zip(totals, w, strict=True)]  # the epoch's length each member allows
            if mix.stop == "shortest":
                length = int(min(ratios) + 1e-9)  # the largest weight's member: finite
                n = [min(k, t) for k, t in zip(sampling.apportion(length, w), totals, strict=True)]
            else:
                most = max(ratios)
                if most > sampling.MAX_DRAW:  # a tiny weight: an epoch beyond any count (inf too)
                    shown = f"{most:,.0f}" if most < 1e18 else f"{most:.3g}"
                    raise DalError(
                        f"mix: stop='longest' makes an epoch of {shown} rows; "
                        f"a mix's epoch holds at most {sampling.MAX_DRAW:,} rows: pass rows=N or stop='shortest'"
                    )
                n = sampling.apportion(int(np.ceil(most - 1e-9)), w)
        if sum(n) > sampling.MAX_DRAW:
            raise DalError(
                f"mix: an epoch of {sum(n):,} rows (stop={mix.stop!r}); a mix's epoch holds at most "
                f"{sampling.MAX_DRAW:,} rows: pass rows=N or stop='shortest'"
            )
        self.counts = n
        block = reader.chunk_rows(mix.query)
        total = sum(n)
        rng = np.random.default_rng([mix.seed, mix.epoch, MIX_TAG])
        left = np.asarray(n, dtype=np.int64)
        per_block = []
        for start in range(0, total, block):  # a uniformly random interleave, drawn block by block
            size = min(block, total - start)
            drawn = rng.multivariate_hypergeometric(left, size) if len(left) > 1 else np.asarray([size])
            per_block.append(drawn)
            left = left - drawn
        self.blocks = np.asarray(per_block, dtype=np.int64).reshape(-1, len(members))
        self.before = np.vstack([np.zeros((1, len(members)), np.int64), np.cumsum(self.blocks, axis=0)])
        super().__init__([min(i * block, total) for i in range(len(per_block))] + [total] if total else [0])

    def read_chunk(self, i: int) -> pa.Table:
        counts = self.blocks[i]
        rng = np.random.default_rng([self.mix.seed, self.mix.epoch, MIX_TAG, i])
        seq = rng.permutation(np.repeat(np.arange(len(counts)), counts))
        tables, base, offset = [], np.zeros(len(counts), np.int64), 0
        for s, k in enumerate(counts):
            base[s] = offset
            if not k:
                continue
            lo = int(self.before[i][s])
            pieces = [p for a, b in wrapped(lo, lo + int(k), self.members[s].total) for p in self.members[s].rows(a, b)]
            for p in pieces:
                p = p.select(self.columns)
                tables.append(pa.Table.from_arrays(p.columns, schema=self.schema))
            offset += int(k)
        index = np.empty(len(seq), dtype=np.int64)
        for s in range(len(counts)):
            where = seq == s
            index[where] = base[s] + np.arange(int(where.sum()))
        return pa.concat_tables(tables).take(pa.array(index))  # one gather (chunked input: no concatenation first)
