"""Adapter probes a new user hits first: a Dataset (not only a Scan) has to_polars / to_duckdb / to_ray, and
to_ray's Ray arguments are checked before anything starts (Ray hands unknown names to the datasource, which
ignores them: a misspelt ``overide_num_blocks`` silently did nothing; ``override_num_blocks="a"`` was a
TypeError from deep inside Ray). Results compared with pyarrow reading the same version."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError


@pytest.fixture
def data(sqlite_env: Catalog) -> dal.Dataset:
    dal.write(pa.table({"id": pa.array(range(50), pa.int64()), "g": [i % 3 for i in range(50)]}), "probe.a")
    return dal.open("probe.a")


def test_a_dataset_reaches_polars_and_duckdb(data: dal.Dataset) -> None:
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    want = data.to_arrow().sort_by("id")
    got = data.to_polars().filter(pl.col("g") == 1).collect().to_arrow()
    assert got.column("id").to_pylist() == [i for i in want.column("id").to_pylist() if i % 3 == 1]
    con = duckdb.connect()
    data.to_duckdb(con, "t")
    assert con.execute("select count(*), sum(id) from t").fetchone() == (50, sum(range(50)))


@pytest.mark.parametrize(
    ("read_args", "message"),
    [
        ({"overide_num_blocks": 4}, "unknown argument"),
        ({"override_num_blocks": 0}, "override_num_blocks must be >= 1"),
        ({"override_num_blocks": "a"}, "override_num_blocks must be an integer"),
        ({"parallelism": 0}, "parallelism"),
        ({"concurrency": -2}, "concurrency must be >= 1"),
        ({"datasource": object()}, "do not pass a datasource"),
    ],
)
def test_to_ray_checks_its_arguments_before_ray_starts(
    data: dal.Dataset, read_args: dict[str, Any], message: str
) -> None:
    pytest.importorskip("ray")
    with pytest.raises(DalError, match=message):
        data.to_ray(**read_args)
    with pytest.raises(DalError, match=message):
        data.select("id").to_ray(**read_args)
