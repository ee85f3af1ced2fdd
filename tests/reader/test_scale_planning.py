"""Planning at scale: a Delta log of 20,000 add actions is pruned by partition values and by the log's
min/max/NULL-count statistics before any file is opened, and the files kept are exactly those a brute-force
evaluation of every file's recorded statistics keeps (NaN-safe: a float column's bounds never prove that no
row is NaN). On a table whose files are real, counts and reads agree with a filter over all the rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dal
from dal import col
from dal.catalog import Catalog
from dal.formats.fragments import dataset_from_files
from tests.reader.delta_log import LogFile, data, write_table

FILES = 20_000


def _has(f: LogFile, lo: float, hi: float) -> bool:
    """Whether the recorded id range meets [lo, hi] (no statistics: it may)."""
    return not f.has_stats or (f.id_range[0] <= hi and f.id_range[1] >= lo)


def _x(f: LogFile, test: Callable[[float, float], bool]) -> bool:
    """Files whose recorded x bounds may pass ``test(lo, hi)``; all-NULL x never does; no statistics: may."""
    if not f.has_stats:
        return True
    return f.x_range is not None and test(*f.x_range)


# (filter, brute force: whether file f may hold a matching row, judged from what its add action records)
CASES: list[tuple[str, object, Callable[[LogFile], bool]]] = [
    ("no filter", None, lambda f: True),
    ("partition", col("part") == 7, lambda f: f.part == 7),
    ("partition in", col("part").isin([3, 5]), lambda f: f.part in (3, 5)),
    ("stats", col("id") == 123_456, lambda f: _has(f, 123_456, 123_456)),
    ("range", (col("id") >= 5_000) & (col("id") < 5_200), lambda f: _has(f, 5_000, 5_199)),
    ("not", ~(col("id") < 199_000), lambda f: _has(f, 199_000, float("inf"))),
    ("or", (col("part") == 3) | (col("id") <= 50), lambda f: f.part == 3 or _has(f, float("-inf"), 50)),
    ("both", (col("part") == 11) & (col("id") > 150_000), lambda f: f.part == 11 and _has(f, 150_001, float("inf"))),
    ("float >", col("x") > 17_000.5, lambda f: _x(f, lambda lo, hi: hi > 17_000.5)),
    # a NaN row passes <> and statistics leave NaN out: no file with a non-NULL x can be ruled out
    ("float <>", col("x") != 5.0, lambda f: _x(f, lambda lo, hi: True)),
    ("not float <", ~(col("x") < 100.0), lambda f: _x(f, lambda lo, hi: True)),
    ("is null", col("x").is_null(), lambda f: not f.has_stats or f.x_range is None),
    ("not null", ~col("x").is_null(), lambda f: not f.has_stats or f.x_range is not None),
    ("string", col("s") == "s000123", lambda f: not f.has_stats or f.i == 123),
    ("sql", "part = 4 AND id BETWEEN 40000 AND 40500", lambda f: f.part == 4 and _has(f, 40_000, 40_500)),
]


@pytest.fixture
def big(sqlite_env: Catalog, tmp_path: Path) -> tuple[str, list[LogFile]]:
    """``scale.big``: 20,000 files in the log (registered before they are added, then synced: the files need
    not exist; those without statistics do, registering counts them from their footers)."""
    root = str(tmp_path / "t")
    files = write_table(
        root, FILES, placeholders=False, before_adds=lambda: dal.register("scale.big", root, format="delta")
    )
    dal.sync("scale.big")
    return root, files


def test_plan_of_20k_files_equals_brute_force(big: tuple[str, list[LogFile]], monkeypatch: pytest.MonkeyPatch) -> None:
    root, files = big
    ds = dal.open("scale.big")
    for name, condition, brute in CASES:
        scan = ds.scan() if condition is None else ds.filter(condition)
        planned = sorted(os.path.relpath(f.uri, root) for f in scan.query.files)
        expected = sorted(f.path for f in files if brute(f))
        assert planned == expected, name
    assert ds.scan().query.total_files == FILES

    # the pyarrow dataset (one fragment per file) holds the files that survive, not the table's 20,000
    made: list[int] = []

    def counting(files, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(len(files))
        return dataset_from_files(files, *args, **kwargs)

    monkeypatch.setattr("dal.read.plan.dataset_from_files", counting)
    scan = dal.open("scale.big").filter((col("part") == 0) & (col("id") < 20_000))
    expected = [f.path for f in files if f.part == 0 and (f.i < 2_000 or not f.has_stats)]
    assert [os.path.relpath(f.uri, root) for f in scan.query.files] == expected
    assert len(scan.query.pa_dataset.files) == len(expected)
    assert made == [len(expected)] and len(expected) < 30


@pytest.fixture
def real(sqlite_env: Catalog, tmp_path: Path) -> tuple[dal.Dataset, pa.Table]:
    """240 real files (two row groups each) named by a log written the same way."""
    root = str(tmp_path / "real")
    files = write_table(root, 240, rows=6, parts=7, real=None)
    rows = pa.concat_tables(data(f).append_column("part", pa.array([f.part] * f.rows, pa.int32())) for f in files)
    dal.register("scale.real", root, format="delta")
    return dal.open("scale.real"), rows


def test_counts_and_reads_match_an_exact_filter(real: tuple[dal.Dataset, pa.Table]) -> None:
    ds, rows = real
    from dal import expr as E

    schema = ds.arrow_schema()
    for name, condition, _brute in CASES:
        scan = ds.scan() if condition is None else ds.filter(condition)
        if condition is None:
            expected = rows
        else:
            expr = scan.query.condition
            assert expr is not None
            expected = rows.filter(E.to_arrow(expr, schema))
        got = scan.to_arrow()
        assert scan.count() == got.num_rows == expected.num_rows, name
        assert sorted(got.column("id").to_pylist()) == sorted(expected.column("id").to_pylist()), name
        if name in ("no filter", "range", "float <>", "or"):  # equal shards of what survives
            sizes = [scan.shard(r, 3, "drop").count() for r in range(3)]
            assert len(set(sizes)) == 1 and sum(sizes) == expected.num_rows // 3 * 3, name


def test_nan_rows_are_never_pruned_by_bounds(sqlite_env: Catalog, tmp_path: Path) -> None:
    """delta-rs records min/max without NaN: a file of [NaN, 1.0] says max 1.0, yet its NaN row passes x <> 1
    and NOT (x < 5)."""
    from deltalake import write_deltalake

    root = str(tmp_path / "nan")
    write_deltalake(root, pa.table({"id": [0, 1], "x": [float("nan"), 1.0]}))
    write_deltalake(root, pa.table({"id": [2, 3], "x": [1.0, 1.0]}), mode="append")
    dal.register("scale.nan", root, format="delta")
    ds = dal.open("scale.nan")
    for condition, ids in ((col("x") != 1.0, [0]), (~(col("x") < 5.0), [0]), (col("x") > 0.5, [1, 2, 3])):
        got = ds.filter(condition).to_arrow()
        assert sorted(got.column("id").to_pylist()) == ids
        assert ds.filter(condition).count() == len(ids)
    assert pc.sum(ds.filter(col("x") == 1.0).to_arrow().column("id")).as_py() == 6
