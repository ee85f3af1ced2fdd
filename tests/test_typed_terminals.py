"""The public terminals are typed: ``to_torch``, ``loader``, ``to_tf``, ``to_polars``, ``to_duckdb``, ``to_ray``,
``to_spark`` and a mix's ``to_torch`` declare what they return (type checkers and IDEs show it) instead of
``Any``; ``to_polars`` has overloads so ``lazy=False`` is a DataFrame. The annotations are resolved here against
the real libraries, so a misspelt or stale one fails too."""

from __future__ import annotations

import typing
from typing import Any

import duckdb
import polars as pl
import pytest
import ray.data
from pyspark.sql import DataFrame as SparkDataFrame
from pyspark.sql import SparkSession

from dal.adapters.torch import Loader, TorchDataset
from dal.dataset import Dataset
from dal.mixing import Mix
from dal.scan import Scan

NAMES = {
    "duckdb": duckdb,
    "pl": pl,
    "ray": ray,
    "SparkDataFrame": SparkDataFrame,
    "SparkSession": SparkSession,
    "TorchDataset": TorchDataset,
    "Loader": Loader,
}


def returns(fn: Any) -> Any:
    return typing.get_type_hints(fn, localns=NAMES)["return"]


@pytest.mark.parametrize("cls", [Scan, Dataset])
def test_terminals_declare_what_they_return(cls: type) -> None:
    assert returns(cls.to_torch) is TorchDataset
    assert returns(cls.to_duckdb) is duckdb.DuckDBPyRelation
    assert returns(cls.to_ray) is ray.data.Dataset
    assert returns(cls.to_spark) is SparkDataFrame
    assert returns(cls.to_polars) == pl.LazyFrame | pl.DataFrame
    lazy, eager, either = (returns(o) for o in typing.get_overloads(cls.to_polars))
    assert (lazy, eager, either) == (pl.LazyFrame, pl.DataFrame, pl.LazyFrame | pl.DataFrame)
    assert "tf.data.Dataset" in str(cls.to_tf.__annotations__["return"])


def test_loader_and_mix_are_typed() -> None:
    assert returns(TorchDataset.loader) is Loader
    assert returns(Mix.to_torch) is TorchDataset
    assert "tf.data.Dataset" in str(Mix.to_tf.__annotations__["return"])


@pytest.mark.parametrize("name", ["to_torch", "to_tf", "sample", "balance"])
def test_the_public_edge_says_what_it_takes(name: str) -> None:
    """Issue #33: ``to_torch``, ``to_tf``, ``sample`` and ``balance`` take explicit, typed parameters (no
    ``**kwargs``), and each is one definition shared by the classes that offer it (not a façade per class)."""
    import inspect

    owners = [c for c in (Scan, Dataset, Mix) if hasattr(c, name)]
    assert len(owners) >= 2
    for cls in owners:
        params = inspect.signature(getattr(cls, name)).parameters.values()
        assert not [p for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], f"{cls.__name__}.{name}"
        annotated = set(getattr(cls, name).__annotations__)
        assert {p.name for p in params} - {"self"} <= annotated, f"{cls.__name__}.{name} has untyped parameters"
    assert len({getattr(c, name) for c in owners}) == 1  # the same function object: defined once
