"""Appending to a Petastorm dataset data that lacks a nullable field: accepted, the field written as nulls (as
Delta appends do); a missing field that is not nullable is still refused. Checked with pyarrow on the version's
files and with the real petastorm 0.13.1 reader (legacy venv)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import SchemaMismatch
from tests.petastorm.legacy import run_legacy

SCHEMA = TensorSchema(
    "Nullable",
    [
        TensorField("id", np.int64, (), ScalarCodec()),
        TensorField("score", np.float64, (), ScalarCodec(), nullable=True),
        TensorField("matrix", np.float32, (2, 2), NdarrayCodec(), nullable=True),
    ],
)


def full(ids: range) -> list[dict[str, object]]:
    return [{"id": i, "score": i / 2, "matrix": np.full((2, 2), i, np.float32)} for i in ids]


def raw(url: str) -> pa.Table:
    """The version's rows as pyarrow reads its Parquet files (dal not involved)."""
    root = url.removeprefix("file://")
    return pads.dataset(root, format="parquet", exclude_invalid_files=True, ignore_prefixes=["_", "."]).to_table()


@pytest.fixture
def written(cat: Catalog) -> None:
    dal.write(full(range(4)), "p.n", format="petastorm", schema=SCHEMA)


def test_append_without_nullable_fields_writes_nulls(written: None, tmp_path: Path) -> None:
    v = dal.write({"id": [10, 11, 12]}, "p.n", format="petastorm")  # no score, no matrix
    assert (v.number, v.row_count, v.operation) == (1, 7, "append")
    v2 = dal.write([{"id": 20, "score": 1.5}], "p.n", format="petastorm")  # row dicts: matrix absent
    assert v2.row_count == 8

    url = dal.open("p.n", 1).petastorm_url
    files = raw(url).sort_by("id")
    assert files.column("id").to_pylist() == [0, 1, 2, 3, 10, 11, 12]
    assert files.column("score").to_pylist() == [0.0, 0.5, 1.0, 1.5, None, None, None]
    assert files.column("matrix").null_count == 3

    got = dal.open("p.n").scan().to_arrow().sort_by("id")
    assert got.column("score").to_pylist() == [0.0, 0.5, 1.0, 1.5, None, None, None, 1.5]
    decoded = dal.open("p.n").to_numpy()
    by_id = dict(zip(decoded["id"].tolist(), decoded["matrix"], strict=True))
    assert by_id[10] is None and by_id[20] is None
    np.testing.assert_array_equal(by_id[3], np.full((2, 2), 3, np.float32))

    # petastorm's own readers read the appended version, nulls included
    out = tmp_path / "read.npz"
    proc = run_legacy("petastorm_read.py", url, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "MAKE_READER 7" in proc.stdout and "MAKE_BATCH_READER 7" in proc.stdout
    legacy = np.load(out, allow_pickle=True)
    for i in (10, 11, 12):  # petastorm reads a null float scalar as NaN (through pandas), a null tensor as None
        assert np.isnan(legacy[f"row/score/{i}"].item()) and np.isnan(legacy[f"batch/score/{i}"].item())
        assert legacy[f"row/matrix/{i}"].item() is None
    assert float(legacy["row/score/2"]) == 1.0
    np.testing.assert_array_equal(legacy["row/matrix/2"], np.full((2, 2), 2, np.float32))


def test_missing_field_that_is_not_nullable_is_refused(written: None, cat: Catalog) -> None:
    with pytest.raises(SchemaMismatch, match=r"missing \['id'\]"):
        dal.write({"score": [1.0]}, "p.n", format="petastorm")
    with pytest.raises(SchemaMismatch, match="not in the schema"):
        dal.write({"id": [1], "extra": [2]}, "p.n", format="petastorm")
    assert [v.number for v in cat.versions("p.n")] == [0]  # nothing was committed


@pytest.mark.spark
def test_spark_append_without_nullable_fields(written: None, spark: object) -> None:
    df = spark.createDataFrame([(30,), (31,)], "id long")  # type: ignore[attr-defined]
    v = dal.write(df, "p.n", format="petastorm")
    assert (v.number, v.row_count) == (1, 6)
    files = raw(dal.open("p.n").petastorm_url).sort_by("id")
    assert files.column("id").to_pylist()[-2:] == [30, 31]
    assert files.column("score").to_pylist()[-2:] == [None, None] and files.column("matrix").null_count == 2
