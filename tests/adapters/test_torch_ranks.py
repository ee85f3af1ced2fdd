"""Which rank a TorchDataset reads as without ``.shard`` (torchrun's environment, taken when read), and the
misuses that used to give wrong data silently: ``DataLoader(data, batch_size=32)`` stacking dal's batches,
``state_dict()`` behind plain DataLoader workers (issue #23 items 1 and 10). The process-group launchers and
worker start methods are in test_rank_matrix.py."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import dal  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402

ROWS = 600


@pytest.fixture
def ds(sqlite_env: Catalog) -> dal.Dataset:
    ids = np.random.default_rng(1).permutation(ROWS)
    for part in np.array_split(ids, 3):
        dal.write(pa.table({"id": part, "x": part.astype(np.float32)}), "r.rows")
    return dal.open("r.rows")


def ids(batches: object) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]  # type: ignore[attr-defined]


@pytest.fixture
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_torchrun_environment_without_a_process_group_names_the_rank(
    ds: dal.Dataset, no_launcher: pytest.MonkeyPatch
) -> None:
    everything = ids(ds.scan().to_torch(64))
    assert sorted(everything) == list(range(ROWS))
    shares = []
    for rank in range(2):
        no_launcher.setenv("RANK", str(rank))
        no_launcher.setenv("WORLD_SIZE", "2")
        data = ds.scan().to_torch(64)
        shares.append(ids(data))
        assert shares[-1] == ids(ds.shard(rank, 2).to_torch(64))
        assert data.state_dict()["world"] == [rank, 2]
        # an explicit shard wins: .shard(0, 1) reads every row whatever the environment says
        assert sorted(ids(ds.shard(0, 1).to_torch(64))) == list(range(ROWS))
    assert len(shares[0]) == len(shares[1]) == ROWS // 2
    assert not set(shares[0]) & set(shares[1]) and sorted(shares[0] + shares[1]) == list(range(ROWS))


@pytest.mark.parametrize(("rank", "world"), [("2", "2"), ("x", "2"), ("0", "0")])
def test_a_broken_launcher_environment_is_a_dal_error(
    ds: dal.Dataset, no_launcher: pytest.MonkeyPatch, rank: str, world: str
) -> None:
    no_launcher.setenv("RANK", rank)
    no_launcher.setenv("WORLD_SIZE", world)
    with pytest.raises(DalError, match=f"RANK={rank!r} and WORLD_SIZE={world!r}"):
        list(ds.scan().to_torch(64))
    assert len(ids(ds.shard(0, 1).to_torch(64))) == ROWS  # naming the shard needs no environment


def test_the_rank_is_taken_when_read_and_persistent_workers_follow_it(
    ds: dal.Dataset, no_launcher: pytest.MonkeyPatch
) -> None:
    data = ds.scan().to_torch(64)  # made before any rank is known
    loader = data.loader(num_workers=2)  # persistent workers (the default), started on the first pass
    assert sorted(ids(loader)) == list(range(ROWS))
    no_launcher.setenv("RANK", "1")
    no_launcher.setenv("WORLD_SIZE", "2")
    expected = ids(ds.shard(1, 2).to_torch(64))
    assert ids(data) == expected and ids(loader) == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_batching_dal_batches_again_is_refused(ds: dal.Dataset, workers: int) -> None:
    data = ds.scan().to_torch(64)
    with pytest.raises(
        DalError, match=r"a DataLoader with a batch_size stacks dal's batches into one \(here \d+: .*batch_size=None"
    ):
        next(iter(DataLoader(data, batch_size=32, num_workers=workers)))
    # the intended use: dal's batches as they are, and a collate_fn the user chose is theirs
    (batch, *_) = DataLoader(data, batch_size=None, num_workers=workers)
    assert batch["id"].shape == (64,)
    stacked = next(iter(DataLoader(data, batch_size=2, collate_fn=list)))
    assert [len(b["id"]) for b in stacked] == [64, 64]


@pytest.mark.parametrize("workers", [1, 2])
def test_state_dict_behind_plain_dataloader_workers_is_refused(ds: dal.Dataset, workers: int) -> None:
    data = ds.shuffle(seed=2).to_torch(50)
    it = iter(DataLoader(data, batch_size=None, num_workers=workers))
    head = [next(it) for _ in range(4)]
    assert len(ids(head)) == 200
    # the workers read those 200 rows; this process's copy never did, and would say rows: 0
    with pytest.raises(DalError, match="plain DataLoader worker processes.*data.loader"):
        data.state_dict()
    del it
    # read here again (or through .loader): its state is right again
    direct = iter(data)
    seen = [next(direct) for _ in range(3)]
    state = data.state_dict()
    assert state["rows"] == 150 == len(ids(seen))
    again = ds.shuffle(seed=2).to_torch(50)
    again.load_state_dict(state)
    assert ids(seen) + ids(again) == ids(ds.shuffle(seed=2).to_torch(50))
