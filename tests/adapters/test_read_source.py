"""Issue #33: what a Scan or a Mix hands the read engine is one frozen value per kind of scan (``dal.read.source``),
never the Scan: a DataLoader worker unpickles that value, and resumption states record its ``identity()`` with
the keys and values they always had."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("torch")

import dal
from dal.catalog import Catalog
from dal.read.mixed import Mixed
from dal.read.source import Picked, RowGroups


@pytest.fixture
def ds(sqlite_env: Catalog) -> dal.Dataset:
    ids = np.arange(500)
    dal.write(pa.table({"id": ids, "label": ids % 3}), "t.src")
    return dal.open("t.src")


def test_each_kind_of_scan_hands_down_its_own_source_and_workers_get_no_scan(ds: dal.Dataset) -> None:
    plain = ds.scan().filter("id < 400").shuffle(seed=3, buffer_size=64).to_torch(16)
    sampled = ds.scan().sample(0.5, seed=1).to_torch(16)
    mixed = dal.mix([ds.scan(), ds.select("id", "label")], seed=2).to_torch(16)
    assert type(plain.source) is RowGroups and type(sampled.source) is Picked and type(mixed.source) is Mixed
    for data in (plain, sampled, mixed):
        shipped = pickle.dumps(data)  # what a spawn DataLoader worker receives
        assert b"dal.scan" not in shipped and b"dal.mixing" not in shipped
        again = pickle.loads(shipped)
        assert [int(i) for b in again for i in b["id"]] == [int(i) for b in data for i in b["id"]]


def test_identity_keeps_the_keys_and_values_states_always_recorded(ds: dal.Dataset) -> None:
    scan = ds.scan().select("id").filter("id < 400").shuffle(seed=3, buffer_size=64)
    assert scan.to_torch(16).state_dict() == {
        "format": 1, "dataset": "t.src", "version": ds.number, "seed": 3, "sampling": None, "where": "id < 400",
        "columns": ["id"], "buffer": 64, "canonical": None, "world": None, "remainder": None, "epoch": 0, "rows": 0,
    }  # fmt: skip
    sampled = ds.scan().sample(rows=10, seed=5).shard(0, 2).to_torch(4).state_dict()
    assert sampled["sampling"] == {
        "kind": "sample", "seed": 5, "fraction": None, "rows": 10, "replace": False, "spread": 4.0, "windows": 16,
    }  # fmt: skip
    assert (sampled["world"], sampled["remainder"], sampled["seed"]) == ([0, 2], "pad", None)
