"""Random access on a pinned version (issue 26): ``len``, ``take(indices)``, a map-style torch dataset with
``DistributedSampler`` — exact against ``to_arrow()`` by row id, with filters and deletion vectors."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from tests.conformance.conftest import require_corpus

torch = pytest.importorskip("torch")

N, FILES = 2_000, 4


@pytest.fixture
def written(sqlite_env: Catalog) -> pa.Table:
    rng = np.random.default_rng(5)
    parts = []
    for k in range(FILES):
        ids = np.arange(k * N // FILES, (k + 1) * N // FILES, dtype=np.int64)
        part = pa.table(
            {
                "id": ids,
                "x": rng.standard_normal(len(ids)).astype(np.float32),
                "img": pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.integers(0, 256, len(ids) * 6, dtype=np.uint8)), 6
                ),
                "name": [f"r{i}" for i in ids],
            }
        )
        dal.write(part, "ra")
        parts.append(part)
    return pa.concat_tables(parts)


def test_take_is_exact_against_to_arrow(written: pa.Table) -> None:
    rng = np.random.default_rng(0)
    for scan in (dal.open("ra").scan(), dal.open("ra").scan().filter("x > 0.3").select("id", "img", "name")):
        whole = scan.to_arrow()
        index = scan.rows()
        assert len(index) == whole.num_rows == scan.count()
        picks = rng.integers(0, len(index), 300)
        picks[:3] = [0, len(index) - 1, 5]
        assert index.take(picks).equals(whole.take(pa.array(picks)))  # order kept, repeats allowed
        assert index.take([-1]).equals(whole.slice(whole.num_rows - 1))
        assert scan.take([7, 2]).equals(whole.take(pa.array([7, 2])))
        assert index.take([]).num_rows == 0 and index.take([]).schema.names == whole.schema.names
        with pytest.raises(IndexError):
            index.take([len(index)])
        clone = pickle.loads(pickle.dumps(index))  # what a spawned DataLoader worker gets
        assert clone.take(picks[:50]).equals(whole.take(pa.array(picks[:50])))


def test_map_dataset_with_distributed_sampler_covers_every_row_once(written: pa.Table) -> None:
    scan = dal.open("ra").scan().filter("id < 300 OR id >= 420")
    want = scan.to_arrow()
    ds = scan.to_torch_map()
    assert len(ds) == want.num_rows
    row = ds[10]
    assert int(row["id"]) == want.column("id")[10].as_py() and row["name"] == want.column("name")[10].as_py()
    assert row["img"].dtype == torch.uint8 and row["img"].tolist() == want.column("img")[10].as_py()
    where = {i: k for k, i in enumerate(want.column("id").to_pylist())}
    seen = []
    for rank in range(2):
        sampler = torch.utils.data.DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        loader = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=0)
        for batch in loader:
            assert batch["img"].shape[1:] == (6,) and batch["img"].dtype == torch.uint8
            positions = [where[i] for i in batch["id"].tolist()]
            expected = want.take(pa.array(positions))
            assert (
                batch["img"].numpy().tobytes()
                == np.stack(expected.column("img").to_numpy(zero_copy_only=False)).tobytes()
            )
            assert np.array_equal(batch["x"].numpy(), expected.column("x").to_numpy())
            seen.extend(batch["id"].tolist())
    assert sorted(seen) == sorted(want.column("id").to_pylist())  # 2 ranks: every row once (even count here)


def test_map_dataset_in_spawned_workers(written: pa.Table) -> None:
    scan = dal.open("ra").scan().select("id", "x")
    ds = scan.to_torch_map()
    loader = torch.utils.data.DataLoader(
        ds, batch_size=100, shuffle=False, num_workers=2, multiprocessing_context="spawn"
    )
    got = torch.cat([b["id"] for b in loader]).tolist()
    assert got == scan.to_arrow().column("id").to_pylist()


def test_deletion_vectors_never_come_back(sqlite_env: Catalog, tmp_path: Path) -> None:
    src = require_corpus() / "delta-rs" / "table-with-dv-small"
    shutil.copytree(src, tmp_path / "dv")
    reference = pa.table(
        QueryBuilder().register("t", DeltaTable(str(tmp_path / "dv"))).execute("select value from t").read_all()
    )
    dal.register("t.dv", str(tmp_path / "dv"))
    scan = dal.open("t.dv").scan()
    index = scan.rows()
    assert len(index) == reference.num_rows
    got = index.take(np.arange(len(index))[::-1])
    assert got.column("value").to_pylist()[::-1] == scan.to_arrow().column("value").to_pylist()
    assert sorted(got.column("value").to_pylist()) == sorted(reference.column("value").to_pylist())


def test_a_sampled_scan_is_refused(written: pa.Table) -> None:
    with pytest.raises(DalError, match="sampled"):
        dal.open("ra").scan().sample(rows=10, seed=1).rows()
