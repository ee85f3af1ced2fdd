"""Samples and mixes through the training feed: shards, DataLoader workers, to_torch / to_tf /
iter_batches, mid-epoch resumption and the elastic (canonical-shard) rule."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there

import dal  # noqa: E402
from dal.errors import DalError  # noqa: E402
from tests.sampling.conftest import ids  # noqa: E402


def sources(data: dal.Dataset, other: dal.Dataset) -> dict[str, Any]:
    """A sampled scan, a balanced one and a mix (of a sample and a shuffled scan), shuffled."""
    return {
        "sample": data.scan().select("id", "label").sample(0.3, seed=1).shuffle(seed=2),
        "balance": data.scan().select("id", "label").balance("label", seed=3).shuffle(seed=2),
        "mix": dal.mix(
            [data.scan().select("id", "label").sample(0.5, seed=4), other.scan().select("id", "label").shuffle(seed=5)],
            [0.6, 0.4],
            seed=6,
            rows=1500,
        ),
    }


def batch_ids(batches: Any) -> list[list[int]]:
    return [[int(i) for i in b["id"]] for b in batches]


def flat(xs: list[list[int]]) -> list[int]:
    return [i for x in xs for i in x]


KINDS = ["sample", "balance", "mix"]


@pytest.mark.parametrize("kind", KINDS)
def test_ranks_get_equal_disjoint_shares(data: dal.Dataset, other: dal.Dataset, kind: str) -> None:
    src = sources(data, other)[kind].set_epoch(2)
    epoch = ids(src.to_arrow())
    assert Counter(flat(batch_ids(src.to_torch(50)))) == Counter(epoch)  # to_torch: the same rows
    assert [b.num_rows for b in src.iter_batches(64)][:-1] == [64] * (len(epoch) // 64)
    for world in (2, 3):
        kept = [flat(batch_ids(src.shard(r, world, "keep").to_torch(50))) for r in range(world)]
        assert flat(kept) == epoch  # "keep": the ranks' rows are the epoch's, in order, each once
        dropped = [batch_ids(src.shard(r, world, "drop").to_torch(50)) for r in range(world)]
        assert len({len(d) for d in dropped}) == 1  # equal batches per rank
        assert len(set(flat([flat(d) for d in dropped]))) == world * (len(epoch) // world)
        padded = [src.shard(r, world).to_torch(50) for r in range(world)]
        assert len({len(list(p)) for p in padded}) == 1 and len({p.num_batches() for p in padded}) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_dataloader_workers_split_without_repeats(data: dal.Dataset, other: dal.Dataset, kind: str) -> None:
    src = sources(data, other)[kind].shard(1, 2, "keep")
    mine = Counter(ids(src.to_arrow()))
    data_set = src.to_torch(40)
    loader = torch.utils.data.DataLoader(data_set, batch_size=None, num_workers=2)
    got = flat(batch_ids(loader))
    assert Counter(got) == mine and len(list(loader)) == data_set.num_batches(num_workers=2)
    chunked = flat(batch_ids(data_set.loader(num_workers=2)))  # workers ship chunks: the same order
    assert chunked == flat(batch_ids(data_set))


@pytest.mark.parametrize("kind", KINDS)
def test_resumption_mid_epoch_is_exact(data: dal.Dataset, other: dal.Dataset, kind: str) -> None:
    for rank in range(2):
        src = sources(data, other)[kind].shard(rank, 2)
        full = batch_ids(src.to_torch(32).__iter__())
        for stop in (1, 3, len(full) - 1):
            first = src.to_torch(32)
            it = iter(first)
            seen = [next(it) for _ in range(stop)]
            state = first.state_dict()
            resumed = src.to_torch(32)
            resumed.load_state_dict(state)
            assert batch_ids(seen) + batch_ids(resumed) == full, (rank, stop)
        with_workers = src.to_torch(32)
        it = iter(with_workers.loader(num_workers=2))
        [next(it) for _ in range(2)]
        again = src.to_torch(32).loader(num_workers=2)
        again.load_state_dict(with_workers.state_dict())
        assert batch_ids(again) == full[2:]


def test_a_state_of_another_sample_is_refused(data: dal.Dataset, other: dal.Dataset) -> None:
    state = data.scan().sample(0.3, seed=1).to_torch(32).state_dict()
    with pytest.raises(DalError, match="sampling="):
        data.scan().sample(0.3, seed=2).to_torch(32).load_state_dict(state)
    mixed = sources(data, other)["mix"]
    state = mixed.to_torch(32).state_dict()
    with pytest.raises(DalError, match="sampling="):
        dal.mix(list(mixed.scans), [0.5, 0.5], seed=6, rows=1500).to_torch(32).load_state_dict(state)
    mixed.to_torch(32).load_state_dict(state)


@pytest.mark.parametrize("kind", KINDS)
def test_elastic_order_and_resume_at_another_world_size(data: dal.Dataset, other: dal.Dataset, kind: str) -> None:
    src = sources(data, other)[kind].set_epoch(1)
    canonical, per_shard = 4, 8  # 8 rows of every canonical shard per step

    def steps(world: int, skip_state: Any = None, take: int | None = None) -> tuple[list[list[int]], Any]:
        loaders = [
            src.shard(r, world).to_torch(per_shard * canonical // world, num_canonical_shards=canonical)
            for r in range(world)
        ]
        if skip_state is not None:
            for d in loaders:
                d.load_state_dict({**skip_state, "world": None})
        its = [iter(d) for d in loaders]
        out = []
        while take is None or len(out) < take:
            try:
                out.append(flat([batch_ids([next(it)])[0] for it in its]))
            except StopIteration:
                break
        return out, loaders[0].state_dict()

    at4, _ = steps(4)
    at2, _ = steps(2)
    assert at4 == at2 == steps(1)[0]  # the same global order at any world size
    head, state = steps(4, take=3)
    rest, _ = steps(2, skip_state=state)
    assert head + rest == at4  # checkpointed at 4 ranks, resumed at 2: nothing lost or repeated
    rows = len(flat(at4))
    assert rows >= len(ids(src.to_arrow())) and rows - len(ids(src.to_arrow())) < canonical  # padding only


@pytest.mark.parametrize("kind", KINDS)
def test_to_tf_yields_the_epoch(data: dal.Dataset, other: dal.Dataset, kind: str) -> None:
    pytest.importorskip("tensorflow")
    src = sources(data, other)[kind].shard(0, 2)
    tfdata = src.to_tf(64)
    assert set(tfdata.element_spec) == {"id", "label"}
    got = [int(i) for b in tfdata for i in b["id"].numpy()]
    assert got == ids(src.to_arrow())
    second = [int(i) for b in tfdata for i in b["id"].numpy()]  # the next pass is the next epoch
    assert second == ids(src.set_epoch(src.epoch + 1).to_arrow()) and second != got
