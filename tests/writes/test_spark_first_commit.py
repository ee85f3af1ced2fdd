"""Spark writes stamp the dataset's name into their first commit, as local writes do: a first Spark write
killed after its storage commit is adopted by the next write or sync of that name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dal
from dal.catalog import Catalog
from dal.formats.registry import get_format
from dal.tensors.codecs import NdarrayCodec
from dal.tensors.schema import TensorField, TensorSchema

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SCHEMA = TensorSchema("Frames", [TensorField("id", np.int64, ()), TensorField("x", np.float32, (2,), NdarrayCodec())])


@pytest.mark.parametrize("format", ["delta", "petastorm"])
def test_a_spark_first_write_names_its_dataset(sqlite_env: Catalog, spark: Any, format: str) -> None:
    cat = sqlite_env
    df = spark.createDataFrame([(i, [i / 2, i / 4]) for i in range(6)], "id long, x array<float>")
    if format == "delta":
        df = df.selectExpr("id", "x[0] AS x")
    dal.write(df, f"sp.{format}", format=format, schema=SCHEMA if format == "petastorm" else None)
    location = cat.get_dataset(f"sp.{format}").location
    assert get_format(format).written_for(location, {}) == f"sp.{format}"
    # the commit is adopted under that name when the catalog forgets the dataset (a killed first write)
    cat.delete_dataset(f"sp.{format}")
    [v] = dal.sync(f"sp.{format}")
    assert v.row_count == 6
