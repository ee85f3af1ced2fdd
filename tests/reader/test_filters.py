"""Every filter operator, as dal.col expressions and as SQL, against pandas on the same rows."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pyarrow as pa
import pytest

import dal
from dal import col
from dal.errors import FilterError

CASES: list[tuple[object, str, Callable[[pd.DataFrame], pd.Series]]] = [
    (col("label") == 1, "label = 1", lambda d: d.label == 1),
    (col("label") != 1, "label <> 1", lambda d: d.label != 1),
    (col("label") < 2, "label < 2", lambda d: d.label < 2),
    (col("label") <= 2, "label <= 2", lambda d: d.label <= 2),
    (col("x") > 150.5, "x > 150.5", lambda d: d.x > 150.5),
    (col("x") >= 150, "x >= 150", lambda d: d.x >= 150),
    (col("station") == "YUL", "station = 'YUL'", lambda d: d.station == "YUL"),
    (col("station").isin(["YUL", "YVR"]), "station IN ('YUL', 'YVR')", lambda d: d.station.isin(["YUL", "YVR"])),
    (col("station").is_null(), "station IS NULL", lambda d: d.station.isna()),
    (~col("x").is_null(), "x IS NOT NULL", lambda d: d.x.notna()),
    (
        (col("station") == "YUL") & (col("label") >= 3),
        "station = 'YUL' AND label >= 3",
        lambda d: (d.station == "YUL") & (d.label >= 3),
    ),
    ((col("label") == 0) | (col("x") < 1), "label = 0 OR x < 1", lambda d: (d.label == 0) | (d.x < 1)),
    (~(col("label") == 0), "NOT label = 0", lambda d: d.label != 0),
    (col("label").between(1, 3), "label BETWEEN 1 AND 3", lambda d: d.label.between(1, 3)),
    (
        col("ts") >= "2026-01-03T12:00:00",
        "ts >= TIMESTAMP '2026-01-03 12:00:00'",
        lambda d: d.ts >= pd.Timestamp("2026-01-03T12:00:00Z"),
    ),
    (col("id") >= 1990, "id >= 1990", lambda d: d.id >= 1990),
    (5 > col("label"), "5 > label", lambda d: d.label < 5),
    ((col("label") == 1) & (col("label") == 2), "label = 1 AND label = 2", lambda d: d.label < -1),
]


@pytest.mark.parametrize(("expr", "sql", "mask"), CASES, ids=[c[1] for c in CASES])
def test_operator_matches_pandas(
    plain: dal.Dataset, rows: pd.DataFrame, expr: object, sql: str, mask: Callable[[pd.DataFrame], pd.Series]
) -> None:
    # SQL semantics: a comparison with NULL is not true, so NULL rows never match (except IS NULL)
    expected = sorted(rows[mask(rows).fillna(False).astype(bool)].id)
    for f in (expr, sql):
        got = plain.filter(f).select("id").to_arrow().column("id").to_pylist()
        assert sorted(got) == expected, f
        assert plain.filter(f).count() == len(expected)


def test_filters_prune_row_groups(plain: dal.Dataset) -> None:
    everything = len(plain.scan().plan())
    narrow = plain.filter(col("id") < 100)
    assert len(narrow.plan()) == 2 < everything  # statistics of 50-row groups rule out the rest
    assert len(plain.filter("date = '2026-01-02'").plan()) < everything / 3  # partition pruning


def test_several_filters_combine_with_and(plain: dal.Dataset, rows: pd.DataFrame) -> None:
    got = plain.filter("label = 1").filter(col("station") == "YYZ").select("id").to_arrow()
    assert sorted(got.column("id").to_pylist()) == sorted(rows[(rows.label == 1) & (rows.station == "YYZ")].id)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("lable = 1", "unknown column 'lable' in filter; did you mean 'label'"),
        ("label = 'x'", "type mismatch: column 'label' is int64"),
        ("station = 3", "type mismatch: column 'station' is {station}"),  # as stored: pandas 3 gives large_string
        ("ts > 'yesterday'", "type mismatch: column 'ts'"),
        ("label = ", "malformed SQL"),
        ("sqrt(label) = 1", "unsupported SQL"),
        ("label IN (SELECT 1)", "unsupported"),
        ("label = NULL", "is_null"),
        ("t.label = 1", "qualified column"),
    ],
)
def test_bad_filters_fail_before_reading(plain: dal.Dataset, bad: str, message: str) -> None:
    station = plain.arrow_schema().field("station").type  # the type the frame's strings were stored as
    assert pa.types.is_string(station) or pa.types.is_large_string(station)
    message = message.format(station=station)
    with pytest.raises(FilterError, match=message.replace("(", "\\(").replace(")", "\\)")):
        plain.filter(bad)


def test_python_boolean_operators_are_refused() -> None:
    with pytest.raises(FilterError, match="use &, \\| and ~"):
        _ = (col("a") == 1) and (col("b") == 2)
