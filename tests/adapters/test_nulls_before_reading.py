"""Nulls a tensor cannot hold are refused when the dataset is made, not mid-epoch (issue #23 item 9: torch
raised a DalError after 79,872 rows, TensorFlow a tf.errors.UnknownError). Footer null counts decide where
they can; a filter that may drop the nulls, or files without statistics, are settled by reading that column
first. Checked against pandas over the same files."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
torch = pytest.importorskip("torch")
tf = pytest.importorskip("tensorflow")

import dal  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402

FILES, PER_FILE = 4, 50
NULL_AT = FILES * PER_FILE - 3  # one null, in the last row group of the last file


def _columns(ids: np.ndarray) -> dict[str, pa.Array]:
    mask = ids == NULL_AT
    return {
        "id": pa.array(ids),
        "n": pa.array(ids * 10, mask=mask),  # int64 with one null
        "ts": pa.array([datetime(2026, 1, 1) + timedelta(seconds=int(i)) for i in ids], pa.timestamp("us"), mask=mask),
        "s": pa.array([f"s{i}" for i in ids], mask=mask),  # a string: torch keeps None, TensorFlow cannot
        "x": pa.array(ids / 2, mask=mask),  # a float: NaN for both
    }


def _write(root: Path, statistics: bool) -> list[Path]:
    root.mkdir()
    paths = []
    for k in range(FILES):
        ids = np.arange(k * PER_FILE, (k + 1) * PER_FILE)
        paths.append(root / f"part-{k}.parquet")
        pq.write_table(pa.table(_columns(ids)), paths[-1], row_group_size=25, write_statistics=statistics)
    return paths


@pytest.fixture(params=[True, False], ids=["statistics", "no-statistics"])
def nulls(request: pytest.FixtureRequest, sqlite_env: Catalog, tmp_path: Path) -> dal.Dataset:
    paths = _write(tmp_path / "n", request.param)
    stats = pq.ParquetFile(paths[-1]).metadata.row_group(1).column(1).statistics
    assert (stats is not None and stats.has_null_count) == request.param  # what the files hold
    dal.register("n.rows", str(tmp_path / "n"), format="parquet")
    return dal.open("n.rows")


def _pandas(ds: dal.Dataset) -> object:
    import pandas as pd

    return pd.concat([pd.read_parquet(f.uri) for f in sorted(ds.files(), key=lambda f: f.uri)])


@pytest.mark.parametrize(("column", "frameworks"), [("n", "torch tf"), ("ts", "torch tf"), ("s", "tf")])
def test_a_null_late_in_the_data_is_refused_before_the_first_batch(
    nulls: dal.Dataset, column: str, frameworks: str
) -> None:
    assert _pandas(nulls)[column].isna().sum() == 1  # the reference: one null, in the last row group
    scan = nulls.select("id", column)
    if "torch" in frameworks:
        with pytest.raises(DalError, match=f"column '{column}' of n.rows holds nulls.*IS NOT NULL"):
            scan.to_torch(16)  # made, not iterated
        with pytest.raises(DalError, match=f"column '{column}'"):
            scan.shard(0, 2).to_torch(16)  # rank 0's rows hold no null: every rank refuses alike
    else:  # torch keeps a null string as None
        batches = list(scan.to_torch(16))
        assert sum(v is None for b in batches for v in b[column]) == 1
    with pytest.raises(DalError, match=f"column '{column}' of n.rows holds nulls.*TensorFlow"):
        scan.to_tf(16)


def test_floats_keep_nan_and_nothing_else_is_refused(nulls: dal.Dataset) -> None:
    (batch,) = list(nulls.select("id", "x").to_torch(1000))
    assert int(torch.isnan(batch["x"]).sum()) == 1
    spec = nulls.select("id", "x").to_tf(1000).element_spec
    assert spec["x"].dtype == tf.float64


FILTERS = {  # the filter, and the same rows in pandas
    "n IS NOT NULL": lambda df: df[df.n.notna()],
    "n >= 0": lambda df: df[df.n >= 0],
    "id < 100": lambda df: df[df.id < 100],
    f"id <> {NULL_AT}": lambda df: df[df.id != NULL_AT],
    "s LIKE 's%'": lambda df: df[df.s.str.startswith("s", na=False)],
}


@pytest.mark.parametrize("where", FILTERS)
def test_a_filter_that_drops_the_nulls_is_accepted(nulls: dal.Dataset, where: str) -> None:
    """``id < 100`` or ``s LIKE …`` say nothing of ``n``: the row groups whose footers show nulls in it (or
    all, without statistics) are read to find out."""
    expected = FILTERS[where](_pandas(nulls))
    scan = nulls.filter(where).select("id", "n", "ts")
    ids = [int(i) for b in scan.to_torch(16) for i in b["id"]]
    assert sorted(ids) == sorted(expected["id"].tolist())
    rows = sum(int(b["id"].shape[0]) for b in scan.to_tf(16))
    assert rows == len(expected)


def test_a_filter_that_keeps_the_nulls_is_refused(nulls: dal.Dataset) -> None:
    for where in ("id >= 100", "x IS NULL OR id < 3"):
        with pytest.raises(DalError, match="column 'n'"):
            nulls.filter(where).select("id", "n").to_torch(16)
        with pytest.raises(DalError, match="column 'n'"):
            nulls.filter(where).select("id", "n").to_tf(16)


def test_a_null_partition_value_is_refused(sqlite_env: Catalog) -> None:
    dal.write(
        pa.table({"id": pa.array([1, 2, 3]), "p": pa.array([1, None, 2], pa.int64())}), "n.parts", partition_by=["p"]
    )
    ds = dal.open("n.parts")
    assert ds.to_pandas()["p"].isna().sum() == 1
    with pytest.raises(DalError, match="column 'p'"):
        ds.to_torch(2)
    with pytest.raises(DalError, match="column 'p'"):
        ds.to_tf(2)
    assert sorted(int(i) for b in ds.filter("p > 0").to_torch(2) for i in b["id"]) == [1, 3]


def test_a_mix_with_nulls_in_one_member_is_refused(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"id": pa.array([1, 2]), "n": pa.array([1, 2])}), "n.clean")
    dal.write(pa.table({"id": pa.array([3, 4]), "n": pa.array([3, None])}), "n.dirty")
    mixed = dal.mix([dal.open("n.clean").scan(), dal.open("n.dirty").scan()], weights=[1, 1], seed=1)
    with pytest.raises(DalError, match="column 'n' of n.dirty"):
        mixed.to_torch(2)


def test_footers_decide_without_reading_rows_where_they_can(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dal.read.reader

    _write(tmp_path / "n", statistics=True)
    dal.register("n.rows", str(tmp_path / "n"), format="parquet")
    ds = dal.open("n.rows")
    read: list[tuple[str, int]] = []
    real = dal.read.reader.read_task
    monkeypatch.setattr(dal.read.reader, "read_task", lambda q, t: read.append((t.uri, t.row_group)) or real(q, t))
    with pytest.raises(DalError, match="column 'n'"):
        ds.select("id", "n").to_torch(16)
    ds.filter("n IS NOT NULL").select("id", "n").to_torch(16)
    ds.select("id", "x").to_torch(16)  # no column a null could break
    assert read == []
    ds.filter(f"id <> {NULL_AT}").select("id", "n").to_torch(16)  # says nothing of n
    assert read == [(read[0][0], 1)] and read[0][0].endswith("part-3.parquet")  # the one row group with a null


def test_through_a_transform_only_what_passes_on_unchanged_is_refused_up_front(nulls: dal.Dataset) -> None:
    from dal import TransformSpec

    scan = nulls.select("id", "n")
    edit = TransformSpec(None, removed_fields=["id"])  # no function: n reaches the tensors as stored
    with pytest.raises(DalError, match="column 'n'"):
        scan.to_torch(16, transform=edit)
    with pytest.raises(DalError, match="column 'n'"):
        scan.to_tf(16, transform=edit)

    def fill(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # a function may replace the nulls
        n = batch["n"]
        return {**batch, "n": np.where(np.isnan(n.astype(np.float64)), -1, n).astype(np.int64)}

    filled = TransformSpec(fill, edit_fields=[("n", np.int64, ())])
    got = [int(v) for b in scan.to_torch(16, transform=filled) for v in b["n"]]
    assert got.count(-1) == 1 and sorted(v for v in got if v >= 0) == [10 * i for i in range(200) if i != NULL_AT]
