"""The read log records a filtered scan's filter (as SQL text) when it is first read, once, and a later
write's lineage names it upstream."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pytest

import dal
from dal import col, lineage
from dal.catalog import Catalog
from dal.expr import bind, parse_sql, to_sql
from tests.conftest import use_catalog


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    lineage.clear_read_log()
    yield
    lineage.clear_read_log()


@pytest.fixture
def cat(sqlite_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    return use_catalog(sqlite_url, tmp_path, monkeypatch)


def rows(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": [float(i) / 2 for i in range(n)],
            "s": ["a", "o'k"] * (n // 2),
            "ts": pa.array([i * 3600 for i in range(n)], pa.timestamp("s", tz="UTC")),
        }
    )


def entries() -> list[tuple[str, int, str | None]]:
    return [(r.dataset, r.version, r.filters) for r in dal.read_log()]


def test_filtered_scan_is_logged_once_with_its_filter(cat: Catalog) -> None:
    dal.write(rows(10), "log.a")
    lineage.clear_read_log()
    ds = dal.open("log.a")
    assert entries() == [("log.a", 0, None)]
    scan = ds.filter("id >= 2 AND s = 'o''k'")
    assert entries() == [("log.a", 0, None)]  # building a scan reads nothing
    assert scan.count() == 4
    logged = ("log.a", 0, "id >= 2 AND s = 'o''k'")
    assert entries() == [("log.a", 0, None), logged]
    scan.to_arrow()
    list(scan.select("id").iter_batches(3, num_epochs=2))
    scan.shard(0, 2).count()
    assert entries() == [("log.a", 0, None), logged]  # the same filter again: no duplicate
    ds.scan().select("id").to_arrow()  # no filter: dal.open's entry says it
    assert entries() == [("log.a", 0, None), logged]
    ds.filter(col("x") != 1).to_arrow()
    assert entries()[-1] == ("log.a", 0, "x <> 1.0")
    # a write after these reads names them upstream, filters included
    v = dal.write(rows(2), "log.b")
    assert v.properties["lineage"]["upstream"] == [
        {"dataset": "log.a", "version": 0, "filters": None, "how": "inferred"},
        {"dataset": "log.a", "version": 0, "filters": "id >= 2 AND s = 'o''k'", "how": "inferred"},
        {"dataset": "log.a", "version": 0, "filters": "x <> 1.0", "how": "inferred"},
    ]


def test_window_is_logged(cat: Catalog) -> None:
    dal.write(rows(48), "log.w", time_column="ts")
    lineage.clear_read_log()
    n = dal.open("log.w").window("1970-01-01T02:00:00", "1970-01-01T05:00:00").count()
    assert n == 3
    opened, entry = dal.read_log()
    assert opened.filters is None
    assert entry.filters == "ts >= TIMESTAMP '1970-01-01 02:00:00+00:00' AND ts < TIMESTAMP '1970-01-01 05:00:00+00:00'"


def test_filter_text_parses_back_to_the_same_filter() -> None:
    schema = rows(2).schema.append(pa.field("my col", pa.int32()))
    for text in [
        "id >= 2 AND s = 'o''k'",
        "NOT x < 5 OR id IN (1, 2)",
        "\"my col\" = 3 AND lower(s) = 'a'",
        "s LIKE 'Y%' AND s IS NULL",
        "(id = 1 OR id = 2) AND x > 0.5",
    ]:
        bound = bind(parse_sql(text), schema)
        again = bind(parse_sql(to_sql(bound)), schema)
        assert repr(again) == repr(bound), text
