"""The PyTorch adapter: ranks x DataLoader workers, tensor dtypes and shapes, epochs, the transform hook."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
from torch.utils.data import DataLoader  # noqa: E402

import dal  # noqa: E402
from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402

ROWS = 1003  # not a multiple of anything below


@pytest.fixture
def env(sqlite_env: Catalog) -> Catalog:
    return sqlite_env


@pytest.fixture
def table_ds(env: Catalog) -> dal.Dataset:
    for k in range(4):  # four files
        ids = np.arange(k * 250, min((k + 1) * 250 + (3 if k == 3 else 0), ROWS))
        dal.write(pa.table({"id": ids, "x": ids.astype(np.float32) / 2, "name": [f"n{i}" for i in ids]}), "t.rows")
    return dal.open("t.rows")


def loader_ids(data: object, workers: int) -> tuple[list[int], int]:
    loader = DataLoader(data, batch_size=None, num_workers=workers)
    batches = list(loader)
    return [int(i) for b in batches for i in b["id"]], len(batches)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_and_workers_cover_every_row_once_with_equal_batches(
    table_ds: dal.Dataset, world: int, workers: int
) -> None:
    seen, batch_counts = [], []
    for rank in range(world):
        ids, n = loader_ids(table_ds.shard(rank, world, "keep").to_torch(batch_size=64), workers)
        seen += ids
    assert sorted(seen) == list(range(ROWS))  # no duplicated, no missing rows
    for rank in range(world):  # default "pad": every rank the same number of batches
        data = table_ds.shard(rank, world).to_torch(batch_size=64)
        ids, n = loader_ids(data, workers)
        batch_counts.append(n)
        assert n == data.num_batches(workers)
    assert len(set(batch_counts)) == 1


def test_tensor_fields_keep_dtype_and_shape(env: Catalog) -> None:
    schema = TensorSchema("T", [
        TensorField("id", np.int64, (), ScalarCodec()),
        TensorField("depth", np.float32, (4, 4), NdarrayCodec()),
        TensorField("rgb", np.uint8, (6, 8, 3), ImageCodec("png")),
    ])  # fmt: skip
    rows = [
        {"id": i, "depth": np.full((4, 4), i, np.float32), "rgb": np.full((6, 8, 3), i, np.uint8)} for i in range(10)
    ]
    dal.write(rows, "t.tensors", format="petastorm", schema=schema)
    batches = list(DataLoader(dal.open("t.tensors").scan().to_torch(batch_size=10), batch_size=None, num_workers=2))
    assert len(batches) == 2  # each worker yields its own (shorter) batch
    batch = {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    assert batch["id"].dtype == torch.int64 and batch["id"].shape == (10,)
    assert batch["depth"].dtype == torch.float32 and batch["depth"].shape == (10, 4, 4)
    assert batch["rgb"].dtype == torch.uint8 and batch["rgb"].shape == (10, 6, 8, 3)
    order = batch["id"].argsort()
    assert torch.equal(batch["rgb"][order][7], torch.full((6, 8, 3), 7, dtype=torch.uint8))


def test_epochs_reshuffle_deterministically(table_ds: dal.Dataset) -> None:
    data = table_ds.shuffle(seed=5, buffer_size=100).to_torch(batch_size=100)
    data.set_epoch(0)
    e0, _ = loader_ids(data, 2)
    again, _ = loader_ids(data, 2)
    data.set_epoch(1)
    e1, _ = loader_ids(data, 2)
    assert e0 == again and e0 != e1 and sorted(e0) == sorted(e1) == list(range(ROWS))


def test_transform_hook_with_declared_schema(table_ds: dal.Dataset) -> None:
    out_schema = pa.schema([("id", pa.int64()), ("x2", pa.float32())])

    def double(batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow.compute as pc

        return pa.record_batch(
            [batch.column("id"), pc.multiply(batch.column("x"), 2).cast(pa.float32())], schema=out_schema
        )

    (first, *_) = list(
        DataLoader(table_ds.select("id", "x").to_torch(64, transform=double, output_schema=out_schema), batch_size=None)
    )
    assert set(first) == {"id", "x2"} and torch.allclose(first["x2"], first["id"].float())
    with pytest.raises(DalError, match="declared output_schema"):
        list(table_ds.to_torch(64, transform=lambda b: b, output_schema=out_schema))
    with pytest.raises(DalError, match="must declare its output_schema"):
        table_ds.to_torch(64, transform=double)


@pytest.mark.filterwarnings("ignore:.*pin_memory.*:UserWarning")
def test_strings_stay_python_and_pin_memory_works(table_ds: dal.Dataset) -> None:
    # pin_memory with dicts of tensors and lists of str (a CPU-only torch warns and passes them through)
    data = table_ds.select("id", "name").to_torch(32)
    batch = next(iter(DataLoader(data, batch_size=None, pin_memory=True, num_workers=2)))
    assert batch["id"].dtype == torch.int64
    assert batch["name"][:2] == [f"n{int(i)}" for i in batch["id"][:2]]


@pytest.fixture
def fresh_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-forked-workers hint is logged once per process: each test starts before it."""
    from dal.adapters import torch as adapter

    monkeypatch.setattr(adapter, "_HINTED", [])
    monkeypatch.setattr(adapter, "_WORKER_PIDS", {})


def hints(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "dal.torch" and "new worker processes" in r.getMessage()
    ]


def test_non_persistent_workers_get_one_hint_from_the_second_epoch(
    table_ds: dal.Dataset, fresh_hint: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="dal.torch")
    data = table_ds.scan().to_torch(batch_size=64)
    loader = DataLoader(data, batch_size=None, num_workers=2)  # persistent_workers=False: torch's default
    first = [int(i) for b in loader for i in b["id"]]
    assert hints(caplog) == []  # the first epoch's workers are the only ones seen: nothing to say yet
    for _epoch in range(2):
        again = [int(i) for b in loader for i in b["id"]]
        assert sorted(again) == sorted(first) == list(range(ROWS))  # the hint changes nothing read
    (line,) = hints(caplog)  # one line, once, however many epochs
    assert "t.rows" in line and "data.loader(num_workers=2)" in line and "persistent_workers=True" in line
    assert "\n" not in line


def test_persistent_workers_and_loader_get_no_hint(
    table_ds: dal.Dataset, fresh_hint: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="dal.torch")
    data = table_ds.scan().to_torch(batch_size=64)
    loader = DataLoader(data, batch_size=None, num_workers=2, persistent_workers=True)
    for _epoch in range(3):
        assert sorted(int(i) for b in loader for i in b["id"]) == list(range(ROWS))
    feed = data.loader(num_workers=2)
    for _epoch in range(2):
        assert sorted(int(i) for b in feed for i in b["id"]) == list(range(ROWS))
    assert hints(caplog) == []
