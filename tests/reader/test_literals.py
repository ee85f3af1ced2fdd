"""SQL's numeric semantics for literals: a literal is compared as the number (date, instant) it is, never
truncated to the column's type; out-of-range literals compare correctly; NULLs stay NULL under NOT.

Each case holds for to_arrow and count, on data and partition columns, and with statistics pruning
(row groups of one row, so pruning decides every row)."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import col
from dal.catalog import Catalog
from dal.errors import FilterError

N = 10
BASE = datetime(2026, 1, 1, tzinfo=UTC)


def table(part: int) -> pa.Table:
    ids = [i for i in range(N) if i % 2 == part]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i8": pa.array([None if i == 3 else i for i in ids], pa.int8()),
            "u8": pa.array(ids, pa.uint8()),
            "f32": pa.array(
                [None if i == 4 else math.nan if i == 3 else i / 2 + 0.1 * (i == 0) for i in ids], pa.float32()
            ),
            "dec": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(5, 2)),
            "d": pa.array([(BASE + timedelta(days=i)).date() for i in ids], pa.date32()),
            "ts": pa.array([BASE + timedelta(milliseconds=1500 * i) for i in ids], pa.timestamp("ms", tz="UTC")),
            "s": pa.array([None if i == 5 else f"s{i}" for i in ids], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> dal.Dataset:
    """ids 0..9 over two int partitions (part = id % 2), one row per row group (built once: read-only)."""
    root = tmp_path_factory.mktemp("typed")
    for part in (0, 1):
        (root / "t" / f"part={part}").mkdir(parents=True)
        pq.write_table(table(part), root / "t" / f"part={part}" / "f.parquet", row_group_size=1)
    cat = Catalog(f"sqlite:///{root}/catalog.db")
    dal.register("r.typed", str(root / "t"), format="parquet", catalog=cat)
    return dal.open("r.typed", catalog=cat)


ALL = set(range(N))
EVEN, ODD = {0, 2, 4, 6, 8}, {1, 3, 5, 7, 9}
CASES: list[tuple[object, set[int]]] = [
    # integers vs fractional literals: never truncated
    ("id = 1.5", set()),
    ("id <> 1.5", ALL),
    ("NOT id = 1.5", ALL),
    ("id < 1.5", {0, 1}),
    ("id <= 1.5", {0, 1}),
    ("id > 1.5", ALL - {0, 1}),
    ("id >= 1.5", ALL - {0, 1}),
    ("id >= -0.5", ALL),
    ("id IN (1.5, 2, 1e30)", {2}),
    ("id NOT IN (1.5, 2)", ALL - {2}),
    ("id IN (1.5)", set()),
    ("id BETWEEN 1.5 AND 3.5", {2, 3}),
    ("id NOT BETWEEN 1.5 AND 3.5", ALL - {2, 3}),
    (col("id") == 1.5, set()),
    (col("id") < 1.5, {0, 1}),
    (col("id") > np.float64(7.5), {8, 9}),
    (col("id") == np.int32(4), {4}),
    (col("id").isin([2.0, 2.5]), {2}),
    # out of the type's range: compared, not overflowed
    ("id = 99999999999999999999999", set()),
    ("id <> 99999999999999999999999", ALL),
    ("id < 99999999999999999999999", ALL),
    ("id > -99999999999999999999999", ALL),
    ("id = 1e20", set()),
    ("id <> 1e20", ALL),
    ("id < 1e20", ALL),
    ("id > 1e20", set()),
    (col("id") < math.inf, ALL),
    (col("id") > -math.inf, ALL),
    ("i8 = 300", set()),
    ("i8 < 300", ALL - {3}),  # NULL stays NULL
    ("NOT i8 > 300", ALL - {3}),
    ("i8 > -129", ALL - {3}),
    ("i8 >= 127.5", set()),
    ("NOT i8 = 300", ALL - {3}),
    ("u8 > -1", ALL),
    ("u8 = -0.5", set()),
    ("u8 < 0.5", {0}),
    ("u8 IN (-1, 256, 3)", {3}),
    # float32 compares as float64 with the literal as float64 (0.1f is not 0.1); NaN as IEEE 754
    ("f32 = 0.5", {1}),
    ("f32 = 0.1", set()),
    ("f32 > 0.1", ALL - {3, 4}),  # 0.1f > 0.1 (and 0.5, 1.0, ...)
    ("f32 <> 0.5", ALL - {1, 4}),  # NaN <> 0.5
    ("NOT f32 >= 1", {0, 1, 3}),  # NaN >= 1 is false
    ("f32 < 1e400", ALL - {3, 4}),
    ("f32 > 1e39", set()),
    (col("f32") != math.inf, ALL - {4}),
    # decimals compare exactly; a Python float is the number it prints as
    ("dec = 0.25", {1}),
    ("dec = 0.255", set()),
    ("dec < 0.255", {0, 1}),
    ("dec > 1e10", set()),
    ("dec <> 1e10", ALL),
    (col("dec") == 0.25, {1}),
    (col("dec") == Decimal("0.250"), {1}),
    # a date is its day's midnight
    ("d = TIMESTAMP '2026-01-02 12:00:00'", set()),
    ("d = TIMESTAMP '2026-01-02 00:00:00'", {1}),
    ("d < TIMESTAMP '2026-01-02 12:00:00'", {0, 1}),
    ("d >= TIMESTAMP '2026-01-02 12:00:00'", ALL - {0, 1}),
    ("d > '2026-01-02T12:00:00'", ALL - {0, 1}),
    (col("d") < datetime(2026, 1, 3, 1, tzinfo=UTC), {0, 1, 2}),
    (col("d") <= date(9999, 12, 31), ALL),
    # timestamps of finer precision than the column's unit (ms)
    ("ts = TIMESTAMP '2026-01-01 00:00:01.500'", {1}),
    ("ts = TIMESTAMP '2026-01-01 00:00:01.500500'", set()),
    ("ts > TIMESTAMP '2026-01-01 00:00:01.500500'", ALL - {0, 1}),
    ("ts <= TIMESTAMP '2026-01-01 00:00:01.500500'", {0, 1}),
    (col("ts") >= datetime(2026, 1, 1, 0, 0, 1, 500500), ALL - {0, 1}),
    (col("ts") < datetime(1, 1, 1, tzinfo=UTC), set()),
    # partition columns take the same literals, and pruning agrees with the rows
    ("part = 0.5", set()),
    ("part < 0.5", EVEN),
    ("part <> 0.5", ALL),
    ("part IN (1, 1.5)", ODD),
    ("part > 1e20", set()),
    ("NOT part > 1e20", ALL),
    # strings, NULLs and NOT IN
    ("s NOT IN ('s1')", ALL - {1, 5}),
    ("s IN ('s1', NULL)", {1}),
    ("NOT s IN ('s1', NULL)", set()),
    (~col("s").isin(["s1", None]), set()),
    ("NOT (s = 's2')", ALL - {2, 5}),
]


@pytest.mark.parametrize(("condition", "expected"), CASES, ids=[str(c[0]) for c in CASES])
def test_literals_compare_as_sql_does(typed: dal.Dataset, condition: object, expected: set[int]) -> None:
    scan = typed.filter(condition)  # type: ignore[arg-type]
    assert set(scan.select("id").to_arrow().column("id").to_pylist()) == expected
    assert scan.count() == len(expected)


def test_window_on_epoch_seconds_is_exact(sqlite_env: Catalog, tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    pq.write_table(pa.table({"t": pa.array(range(-3, 4), pa.int64())}), tmp_path / "e" / "f.parquet")
    dal.register("r.epoch", str(tmp_path / "e"), format="parquet", time_column="t")
    ds = dal.open("r.epoch")
    half = timedelta(milliseconds=500)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    got = ds.scan().window(epoch + half, epoch + 3 * half).to_arrow().column("t").to_pylist()
    assert got == [1]  # 0.5 <= t < 1.5: the fractional start is not truncated to 0
    got = ds.scan().window(epoch - 5 * half, epoch - half).to_arrow().column("t").to_pylist()
    assert got == [-2, -1]  # -2.5 <= t < -0.5


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        (col("f32") == math.nan, "NaN literal compared with column 'f32'"),
        (col("id") > float("nan"), "NaN literal"),
        (col("id") == True, "type mismatch: column 'id' is int64"),  # noqa: E712
        ("id = s", "cannot compare column 'id' \\(int64\\) with column 's' \\(string\\)"),
        ("d = ts", "cannot compare column 'd'"),
        ("dec < f32", "cannot compare column 'dec'"),
        ("d = 'tomorrow'", "type mismatch: column 'd' is date32"),
    ],
)
def test_bad_literals_are_filter_errors(typed: dal.Dataset, condition: object, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        typed.filter(condition)  # type: ignore[arg-type]


def test_isin_takes_a_list() -> None:
    with pytest.raises(FilterError, match="isin takes a list of values, not str"):
        col("s").isin("abc")


def test_float_in_lists_and_comparisons_follow_ieee() -> None:
    """-0.0 = 0.0 (is_in hashes the bits, so IN needs both); NaN is unequal to everything; NULL stays NULL."""
    import pyarrow.dataset as pads

    from dal.expr import bind, parse_sql, to_arrow

    t = pa.table({"x": pa.array([0.0, -0.0, None, 1.0, math.nan], pa.float32()), "k": range(5)})

    def keys(sql: str) -> list[int]:
        flt = to_arrow(bind(parse_sql(sql), t.schema), t.schema)
        return pads.dataset(t).to_table(filter=flt).column("k").to_pylist()

    assert keys("x IN (0.0, NULL)") == keys("x IN (-0)") == keys("x = 0") == [0, 1]
    assert keys("NOT x IN (-0.0)") == keys("x <> 0") == [3, 4]
    assert keys("NOT x IN (0, NULL)") == []


def test_columns_of_related_types_compare() -> None:
    """Column against column: timestamps of other units and zones, date32/date64, uint64/int64 (no
    ArrowNotImplementedError, no overflow)."""
    import pyarrow.dataset as pads

    from dal.expr import bind, parse_sql, to_arrow

    t = pa.table(
        {
            "a": pa.array([0, 1000, 5], pa.timestamp("ms", "UTC")),
            "b": pa.array([0, 2_000_000, 5000], pa.timestamp("us", "Europe/Paris")),
            "c": pa.array([0, 1, 2], pa.date32()),
            "d": pa.array([0, 2 * 86_400_000, 2 * 86_400_000], pa.date64()),
            "u": pa.array([1, 2**64 - 1, 3], pa.uint64()),
            "i": pa.array([1, -2, 4], pa.int64()),
        }
    )

    def rows(sql: str) -> list[int]:
        flt = to_arrow(bind(parse_sql(sql), t.schema), t.schema)
        return [
            k for k, keep in enumerate(pads.dataset(t).to_table(columns={"m": flt}).column("m").to_pylist()) if keep
        ]

    assert rows("a = b") == [0, 2] and rows("a < b") == [1]
    assert rows("c = d") == [0, 2] and rows("c < d") == [1]
    assert rows("u > i") == [1] and rows("u = i") == [0] and rows("u < i") == [2]


def test_nan_rows_survive_statistics_pruning(sqlite_env: Catalog, tmp_path: Path) -> None:
    """Parquet statistics leave NaN out of min/max: a row group of [NaN, 1, 2] has min 1. Comparisons that
    are true for NaN (NOT x > 0, x <> 1, and a partition column against x, which pyarrow turns into a
    literal comparison under the partition's guarantee) must not be pruned away by them."""
    (tmp_path / "n" / "p=0").mkdir(parents=True)
    data = pa.table({"k": [0, 1, 2], "x": pa.array([math.nan, 1.0, 2.0], pa.float32())})
    pq.write_table(data, tmp_path / "n" / "p=0" / "f.parquet")
    dal.register("r.nan", str(tmp_path / "n"), format="parquet")
    ds = dal.open("r.nan")
    for condition, expected in [
        ("NOT x > 0", [0]),
        ("x <> 1", [0, 2]),
        ("NOT x IN (1, 2)", [0]),
        ("NOT p < x", [0]),
        ("p <> x", [0, 1, 2]),
        ("NOT x >= p", [0]),
    ]:
        scan = ds.filter(condition)
        assert sorted(scan.select("k").to_arrow().column("k").to_pylist()) == expected, condition
        assert scan.count() == len(expected), condition


@pytest.mark.parametrize(
    "condition", ["x <> 1", "NOT x < 5", "NOT x IN (1, NULL)", "x < 5", "NOT x <> 1", "k = 0 OR NOT (x > 0 AND k > 5)"]
)
def test_pushdown_filter_prunes_soundly_around_nan(tmp_path: Path, condition: str) -> None:
    """pyarrow substitutes a row group's value when its min equals its max, and Parquet min/max ignore NaN:
    [NaN, 1, 1] is pruned from `x <> 1` even with an is_nan term. expr.pushdown widens the filter so that
    pruning is sound; the exact filter then runs on the rows it lets through."""
    import pyarrow.dataset as pads

    from dal.expr import bind, parse_sql, pushdown, to_arrow

    t = pa.table({"k": [0, 1, 2], "x": [math.nan, 1.0, 1.0]})
    pq.write_table(t, tmp_path / "f.parquet")
    bound = bind(parse_sql(condition), t.schema)
    exact = to_arrow(bound, t.schema)
    pushed, widened = pushdown(bound, t.schema)
    rows = pads.dataset(tmp_path).to_table(filter=pushed)
    if widened:
        rows = rows.filter(exact)
    assert rows.column("k").to_pylist() == t.filter(exact).column("k").to_pylist()
