"""The filter language's SQL-user constructs: LIKE / ILIKE, abs, lower / upper, IN / BETWEEN over functions,
DATE / TIMESTAMP literals, and the errors a user gets for misuse (rows are checked against DuckDB in
test_filter_differential.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa
import pytest

import dal
from dal import col
from dal.catalog import Catalog
from dal.errors import FilterError

TABLE = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "s": ["YUL", "yyz", None, "a_b", "É", "o'k", "YUL ", "abc"],
        "x": pa.array([-128, 2, None, -3, 5, 0, 127, -1], pa.int8()),
        "d": [date(2026, 1, i + 1) for i in range(8)],
        "ts": [datetime(2026, 1, 1, i, tzinfo=UTC) for i in range(8)],
    }
)


@pytest.fixture
def ds(sqlite_env: Catalog) -> dal.Dataset:
    dal.write(TABLE, "f.lang", partition_by=["d"])
    return dal.open("f.lang")


def ids(ds: dal.Dataset, condition: object) -> list[int]:
    return sorted(ds.filter(condition).select("id").to_arrow().column("id").to_pylist())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("s LIKE 'Y%'", [0, 6]),
        ("s LIKE 'a\\_b'", [3]),
        ("s LIKE 'a_b'", [3]),
        ("s ILIKE 'y%'", [0, 1, 6]),
        ("s NOT LIKE '%b%'", [0, 1, 4, 5, 6]),
        ("lower(s) = 'yul'", [0]),
        ("'YYZ' = upper(s)", [1]),
        ("upper(s) IN ('YUL', 'ABC')", [0, 7]),
        ("abs(x) > 100", [0, 6]),
        ("abs(x) >= 128", [0]),
        ("abs(x) = -1", []),
        ("abs(x) <> -1", [0, 1, 3, 4, 5, 6, 7]),
        ("abs(x) BETWEEN 1 AND 3", [1, 3, 7]),
        ("abs(x) IN (0, 3)", [3, 5]),
        ("x NOT IN (2, -3)", [0, 4, 5, 6, 7]),
        ("d BETWEEN DATE '2026-01-02' AND DATE '2026-01-03'", [1, 2]),
        ("ts >= TIMESTAMP '2026-01-01 06:00:00'", [6, 7]),
    ],
)
def test_sql(ds: dal.Dataset, sql: str, expected: list[int]) -> None:
    assert ids(ds, sql) == expected
    assert ds.filter(sql).count() == len(expected)


def test_python_api(ds: dal.Dataset) -> None:
    assert ids(ds, col("s").like("Y%")) == [0, 6]
    assert ids(ds, ~col("s").ilike("Y%")) == [3, 4, 5, 7]
    assert ids(ds, col("s").lower() == "yul") == ids(ds, "lower(s) = 'yul'")
    assert ids(ds, "yyz" == col("s").lower()) == [1]
    assert ids(ds, col("x").abs() > 100) == [0, 6]
    assert ids(ds, 3 <= col("x").abs()) == [0, 3, 4, 6]
    assert ids(ds, col("x").abs().between(1, 3)) == [1, 3, 7]
    assert ids(ds, col("s").upper().isin(["YUL", "ABC"])) == [0, 7]


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("x LIKE 'a'", "LIKE needs a string column"),
        ("s LIKE s", "string pattern"),
        ("s LIKE 'a!%' ESCAPE '!'", "ESCAPE"),
        ("lower(x) = 'a'", "needs a string column"),
        ("lower(s) = 1", "string literal"),
        ("lower(s) = s", "literal only"),
        ("abs(x) > 'a'", "compares with a number"),
        ("abs(x) > x", "literal only"),
        ("abs(1) > 0", "takes a column"),
        ("lower(s) IN ('a', NULL)", "NULL"),
        ("sqrt(x) > 1", "unsupported"),
        ("d = DATE 'yesterday'", "bad date"),
    ],
)
def test_bad_filters(ds: dal.Dataset, condition: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        ds.filter(condition).count()


def test_bad_python_filters() -> None:
    with pytest.raises(FilterError):
        col("s").like(3)  # type: ignore[arg-type]
    with pytest.raises(FilterError):
        col("x").abs() > float("nan")  # noqa: B015
    with pytest.raises(FilterError):
        col("s").lower() == col("t")  # noqa: B015
    with pytest.raises(FilterError):
        col("s").lower().isin("abc")
