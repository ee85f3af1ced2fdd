"""Datasets for the sampling and mixing tests: many small row groups, so that row-group pushdown and the
two-stage draw have something to act on, and chunks of ~100 rows so that streams have many chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog

ROWS = 4000  # 4 files x 10 row groups x 100 rows
GROUP = 100
LABELS = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 2])  # label = LABELS[id % 10]: 70% / 20% / 10%


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import dal.read.reader

    monkeypatch.setattr(dal.read.reader, "MIN_CHUNK_ROWS", 100)
    monkeypatch.setattr(dal.read.reader, "CHUNK_BYTES", 1)


def table_of(ids: np.ndarray) -> pa.Table:
    return pa.table(
        {"id": ids.astype(np.int64), "label": LABELS[ids % 10].astype(np.int64), "x": ids.astype(np.float32) / 2}
    )


def write_dir(root: Path, first: int, rows: int, files: int = 4) -> None:
    root.mkdir()
    per = rows // files
    for k in range(files):
        ids = np.arange(first + k * per, first + (k + 1) * per)
        pq.write_table(table_of(ids), root / f"part-{k}.parquet", row_group_size=GROUP)


@pytest.fixture
def data(sqlite_env: Catalog, tmp_path: Path, small_chunks: None) -> dal.Dataset:
    write_dir(tmp_path / "main", 0, ROWS)
    dal.register("s.main", str(tmp_path / "main"), format="parquet")
    return dal.open("s.main")


@pytest.fixture
def other(data: dal.Dataset, tmp_path: Path) -> dal.Dataset:
    """A second dataset of the same schema, ids from 100000 (1000 rows)."""
    write_dir(tmp_path / "other", 100_000, 1000, files=2)
    dal.register("s.other", str(tmp_path / "other"), format="parquet")
    return dal.open("s.other")


def ids(table: pa.Table) -> list[int]:
    return [int(i) for i in table.column("id").to_pylist()]


def within(observed: float, mean: float, var: float, k: float = 4.0) -> bool:
    """|observed - mean| <= k standard deviations (the tests' tolerance, from the draw's variance)."""
    return abs(observed - mean) <= k * np.sqrt(var) + 1e-9
