"""The API fuzz clusters of issue #22, each a ``DalError`` naming the argument (never AttributeError,
TypeError, ValueError, UnicodeEncodeError or OverflowError from inside), and nothing written when refused."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.catalog.errors import DatasetNotFound
from dal.errors import DalError, FilterError, SchemaMismatch
from dal.ops import lifecycle

SCHEMA = TensorSchema(
    "s", [TensorField("a", np.int64, (), ScalarCodec(pa.int64())), TensorField("img", np.uint8, (2, 2), NdarrayCodec())]
)
GOOD = np.zeros((2, 2), np.uint8)


@pytest.fixture
def ds(sqlite_env: Catalog) -> dal.Dataset:
    dal.write(pa.table({"a": [1, 2, 1, 2], "b": [1.0, 2.0, 3.0, 4.0]}), "d.x")
    return dal.open("d.x")


@pytest.mark.parametrize("schema", ["x", {"a": "int64"}, pa.schema([("a", pa.int64())])])
def test_a_petastorm_schema_that_is_not_a_tensor_schema(sqlite_env: Catalog, schema: object) -> None:
    with pytest.raises(DalError, match=r"schema must be a dal\.TensorSchema \(or None\), not "):
        dal.write(pd.DataFrame({"a": [1]}), "p.x", format="petastorm", schema=schema)  # type: ignore[arg-type]
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("p.x")


@pytest.mark.parametrize(
    "cells, column",
    [
        ({"a": [1, 2], "img": ["not an array", GOOD]}, "img"),
        ({"a": [1, 2], "img": [object(), GOOD]}, "img"),
        ({"a": [1, 2], "img": [np.zeros((3, 3), np.uint8), GOOD]}, "img"),
        ({"a": [1, 2], "img": [np.full((2, 2), 1e300), GOOD]}, "img"),
        ({"a": ["x", "y"], "img": [GOOD, GOOD]}, "a"),
        ({"a": [2**70, 1], "img": [GOOD, GOOD]}, "a"),
    ],
)
def test_bad_petastorm_cells_name_the_column(sqlite_env: Catalog, cells: dict[str, list[object]], column: str) -> None:
    with pytest.raises(SchemaMismatch, match=rf"field '{column}'"):
        dal.write(pd.DataFrame(cells), "p.bad", format="petastorm", schema=SCHEMA)
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("p.bad")


def test_numpy_integers_are_integers(ds: dal.Dataset) -> None:
    scan = ds.scan().shuffle(seed=np.int64(3)).set_epoch(np.int64(1))
    assert scan.epoch == 1
    torch_ds = scan.to_torch(batch_size=np.int64(2))
    assert sum(len(b["a"]) for b in torch_ds) == 4
    assert ds.scan().balance("a", {np.int64(1): np.float64(2.0), 2: 1.0}, rows=np.int64(3), seed=np.uint8(1))


@pytest.mark.parametrize("bad", [np.array([1, 2]), np.array([[2]]), np.array([], dtype=np.int64), np.array(["2"])])
def test_numpy_arrays_as_integers_are_refused(ds: dal.Dataset, bad: np.ndarray) -> None:
    with pytest.raises(FilterError, match=r"seed must be an integer, not ndarray"):
        ds.scan().shuffle(seed=bad)
    with pytest.raises(FilterError, match=r"epoch must be an integer, not ndarray"):
        ds.scan().set_epoch(bad)
    with pytest.raises(FilterError, match=r"batch_size must be an integer, not ndarray"):
        ds.scan().to_torch(batch_size=bad)


@pytest.mark.parametrize("weights", [np.array([0.5, 0.5]), np.array([]), [0.5, 0.5], pd.Series([1.0, 2.0])])
def test_balance_weights_that_are_not_a_dict(ds: dal.Dataset, weights: object) -> None:
    with pytest.raises(FilterError, match=r"balance weights must be 'uniform' or a non-empty dict"):
        ds.scan().balance("a", weights)  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["description", "path", "format", "catalog", "storage_options"])
def test_surrogate_strings_are_refused_before_anything_is_written(
    sqlite_env: Catalog, tmp_path: Path, where: str
) -> None:
    bad = "x\udc80y"
    kwargs: dict[str, object] = {
        "description": {"description": bad},
        "path": {"path": str(tmp_path / bad)},
        "format": {"format": bad},
        "catalog": {"catalog": f"sqlite:///{tmp_path}/{bad}.db"},
        "storage_options": {"storage_options": {"AWS_REGION": bad}},
    }[where]
    with pytest.raises(DalError, match=r"not valid Unicode text") as e:
        dal.write(pa.table({"a": [1]}), "s.x", **kwargs)  # type: ignore[arg-type]
    assert bad not in str(e.value) or where != "storage_options"
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("s.x")
    assert sorted(p.name for p in tmp_path.iterdir() if "\udc80" in p.name) == []


def test_surrogates_in_names_tags_and_lookups(ds: dal.Dataset) -> None:
    for call in (
        lambda: dal.write(pa.table({"a": [1]}), "d.\udc80"),
        lambda: dal.write(pa.table({"a": [1]}), "d.x", tags=["\ud800"]),
        lambda: dal.open("d.\udc80"),
        lambda: dal.open("d.x", "\udc80"),
        lambda: dal.register("r.\udc80", "/tmp/x"),
    ):
        with pytest.raises(DalError):
            call()


@pytest.mark.parametrize("text", ["999999999w", "999999999d", "99999999w"])
def test_huge_durations(text: str) -> None:
    try:
        older = lifecycle.parse_duration(text)
    except DalError as e:
        assert "too long a duration" in str(e)
        return
    assert older > timedelta(days=10**8)


def test_gc_older_than_the_calendar_keeps_everything(ds: dal.Dataset) -> None:
    dal.write(pa.table({"a": [3], "b": [5.0]}), "d.x")
    result = lifecycle.gc("d.x", older_than=timedelta.max, keep_last=1)
    assert [v.number for v in dal.get_catalog().versions("d.x") if v.unavailable is None] == [0, 1], result
