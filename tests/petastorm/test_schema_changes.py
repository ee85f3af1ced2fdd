"""Petastorm writes from pandas / dicts (issue 23, item 5): a float NaN is stored as NaN and a missing value as a
null; the schema changes as a Delta table's does (merge adds nullable fields, a schema overwrite replaces it,
anything else is refused with the call that works); an overwrite keeps the partitioning unless told otherwise;
a field without a storage type is refused before anything is written, by name."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import SchemaMismatch

SCHEMA = TensorSchema(
    "Obs",
    [
        TensorField("id", np.int64),
        TensorField("p", np.str_),
        TensorField("x", np.float64, (), ScalarCodec(), nullable=True),
    ],
)


def obs(ids: range, p: str = "a") -> dict[str, list[object]]:
    return {"id": list(ids), "p": [p] * len(ids), "x": [i / 2 for i in ids]}


def stored(name: str, column: str) -> list[object]:
    """The column's values in the version's Parquet files, as pyarrow reads them (dal's decoding not involved)."""
    return [v for f in dal.open(name).files() for v in pq.read_table(f.uri).column(column).to_pylist()]


def test_nan_is_stored_as_nan_and_missing_values_as_nulls(cat: Catalog) -> None:
    x = [math.nan] * 5 + [None, 1.5, None]
    dal.write({"id": list(range(8)), "p": ["a"] * 8, "x": x}, "nan.pt", format="petastorm", schema=SCHEMA)
    values = stored("nan.pt", "x")
    assert sum(v is None for v in values) == 2 and sum(isinstance(v, float) and math.isnan(v) for v in values) == 5
    # pandas' own missing markers are nulls, its NaN a value
    ts = TensorSchema("T", [TensorField("id", np.int64), TensorField("t", np.datetime64, (), ScalarCodec("timestamp[us]"), nullable=True),
                            TensorField("n", np.int64, (), nullable=True)])  # fmt: skip
    frame = pd.DataFrame({"id": [1, 2], "t": pd.to_datetime(["2024-01-01", None]), "n": pd.array([7, None], "Int64")})
    dal.write(frame, "nat.pt", format="petastorm", schema=ts)
    assert stored("nat.pt", "t")[1] is None and stored("nat.pt", "n") == [7, None]


def test_merge_adds_nullable_fields_and_overwrite_replaces_the_schema(cat: Catalog) -> None:
    dal.write(obs(range(4)), "evo.pt", format="petastorm", schema=SCHEMA, partition_by=["p"])
    location = cat.get_dataset("evo.pt").location
    wider = TensorSchema("Obs", [*SCHEMA.fields, TensorField("m", np.float32, (2,), NdarrayCodec(), nullable=True)])
    rows = {**obs(range(4, 6)), "m": [np.ones(2, np.float32), None]}
    with pytest.raises(SchemaMismatch, match=r"added \['m'\].*schema_mode='merge' adds nullable fields"):
        dal.write(rows, "evo.pt", format="petastorm", schema=wider)
    not_null = TensorSchema("Obs", [*SCHEMA.fields, TensorField("m", np.float32, (2,), NdarrayCodec())])
    with pytest.raises(SchemaMismatch, match=r"new fields \['m'\] are not nullable"):
        dal.write(rows, "evo.pt", format="petastorm", schema=not_null, schema_mode="merge")
    changed = TensorSchema("Obs", [TensorField("id", np.int32), *SCHEMA.fields[1:]])
    with pytest.raises(SchemaMismatch, match=r"fields \['id'\] differ from the dataset's"):
        dal.write(obs(range(2)), "evo.pt", format="petastorm", schema=changed, schema_mode="merge")
    assert len(cat.versions("evo.pt")) == 1

    v1 = dal.write(rows, "evo.pt", format="petastorm", schema=wider, schema_mode="merge")
    assert (v1.operation, v1.row_count, v1.schema.names, v1.partition_columns) == (
        "schema-change", 6, ("id", "p", "x", "m"), ("p",)
    )  # fmt: skip
    got = dal.open("evo.pt").to_numpy()
    by_id = {int(i): m for i, m in zip(got["id"], got["m"], strict=True)}
    assert [by_id[i] is None for i in range(6)] == [True] * 4 + [False, True]
    # the previous version's directory is untouched: its files keep their three columns
    v0_dir = dal.open("evo.pt", 0).petastorm_url.rsplit("/", 1)[1]
    assert all("m" not in pq.read_schema(p).names for p in Path(location, v0_dir).rglob("*.parquet"))
    # a later append without m: written as nulls
    assert dal.write(obs(range(6, 7)), "evo.pt", format="petastorm").row_count == 7

    # an overwrite keeps the partitioning; a different one needs a schema overwrite
    v3 = dal.write(obs(range(100, 102), "b"), "evo.pt", format="petastorm", mode="overwrite")
    assert (v3.operation, v3.partition_columns, v3.row_count) == ("overwrite", ("p",), 2)
    assert sorted(os.listdir(dal.open("evo.pt").petastorm_url.removeprefix("file://"))) == ["_common_metadata", "p=b"]
    with pytest.raises(SchemaMismatch, match=r"partitioned by \['p'\], not \[\]; to change that"):
        dal.write(obs(range(2)), "evo.pt", format="petastorm", mode="overwrite", partition_by=[])
    # a different schema on a plain overwrite is refused (as for Delta); a schema overwrite replaces it
    other = TensorSchema("Other", [TensorField("id", np.int64), TensorField("v", np.float32, (3,), NdarrayCodec())])
    data = {"id": [1, 2], "v": [np.zeros(3, np.float32), np.ones(3, np.float32)]}
    with pytest.raises(SchemaMismatch, match=r"removed \['p', 'x', 'm'\].*schema_mode='overwrite' replaces it"):
        dal.write(data, "evo.pt", format="petastorm", schema=other, mode="overwrite")
    v4 = dal.write(
        data, "evo.pt", format="petastorm", schema=other, mode="overwrite", schema_mode="overwrite", partition_by=[]
    )
    assert (v4.schema.names, v4.partition_columns, v4.properties["unischema"]) == (("id", "v"), (), "Other")
    assert dal.open("evo.pt").to_numpy()["v"].shape == (2, 3)
    assert [v.row_count for v in cat.versions("evo.pt")] == [4, 6, 7, 2, 2]


def test_a_field_without_a_storage_type_is_refused_by_name(cat: Catalog) -> None:
    schema = TensorSchema("S", [TensorField("id", np.int64), TensorField("when", np.datetime64, ())])
    with pytest.raises(SchemaMismatch, match=r"field 'when': dtype datetime64 has no default scalar storage type"):
        dal.write({"id": [1], "when": [np.datetime64("2024-01-01")]}, "bad.pt", format="petastorm", schema=schema)
    assert cat.list_datasets() == []
