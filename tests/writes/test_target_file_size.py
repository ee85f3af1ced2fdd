"""Local (pandas/Arrow) Delta writes hand ``target_file_size`` to delta-rs: a small target splits a write into
several files, every row still written exactly once; the default writes one file."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import dal
from dal.catalog import Catalog


def data_files(cat: Catalog, name: str) -> list[Path]:
    root = Path(cat.get_dataset(name).location)
    return [p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts]


def test_delta_rs_splits_files_at_the_target(sqlite_env: Catalog) -> None:
    n = 300_000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array([i * 7 % 1_000_003 for i in range(n)])})
    dal.write(data, "tf.default")
    assert len(data_files(sqlite_env, "tf.default")) == 1
    dal.write(data, "tf.small", target_file_size=256 * 1024)
    assert len(data_files(sqlite_env, "tf.small")) > 1
    got = dal.open("tf.small").to_arrow().sort_by("id")
    assert got.equals(data.cast(got.schema))
