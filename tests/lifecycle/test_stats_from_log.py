"""``dal stats`` of a Delta version from the log's per-file statistics where they are exact (issue #34: it read
one footer per file, 50,000 for a 50,000-file table), footers only for the columns and files the log does not
state exactly (truncated long strings, millisecond timestamps, unindexed columns, deletion-vector files). The
results are compared with footers read by pyarrow itself and with DuckDB over the rows; data files are spoiled
(overwritten with non-Parquet bytes) to prove which are never opened."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import dal
from dal import lifecycle
from dal.catalog import Catalog
from dal.errors import FormatError
from tests.conformance.conftest import require_corpus


def _batch(k: int, rows: int = 7) -> pa.Table:
    ids = [k * rows + i for i in range(rows)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "small": pa.array([None if i % 3 == 0 else i % 100 - 50 for i in ids], pa.int16()),
            "f": pa.array([None if i % 4 == 1 else (i - 20) / 3 for i in ids], pa.float64()),
            "s": pa.array([None if i % 5 == 2 else f"v{i:03d}" for i in ids], pa.string()),
            "long": pa.array([("é" * 12 + "a" * 18) + f"{i:05d}" + "z" * (i % 3) for i in ids], pa.string()),
            "day": pa.array([date(2026, 1, 1) + timedelta(days=i) for i in ids], pa.date32()),
            "ts": pa.array([datetime(2026, 1, 1, 0, 0, 0, 1234 * i + 7) for i in ids], pa.timestamp("us")),
            "empty": pa.array([None] * rows, pa.int32()),
            "part": pa.array([f"p{k % 3}"] * rows, pa.string()),
        }
    )


def _data_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def _spoil(paths: list[Path]) -> None:
    for p in paths:
        p.write_bytes(b"not parquet" * 10)


def _by_footers(location: Path, columns: list[str], parts: tuple[str, ...] = ()) -> dict[str, tuple[Any, ...]]:
    """(nulls, min, max) per data column, from every active file's footer as pyarrow reads it."""
    out: dict[str, list[Any]] = {c: [0, None, None] for c in columns if c not in parts}
    for rel in DeltaTable(str(location)).file_uris():
        md = pq.ParquetFile(rel).metadata
        names = [md.schema.column(i).name for i in range(md.num_columns)]
        for g in range(md.num_row_groups):
            for c, acc in out.items():
                st = md.row_group(g).column(names.index(c)).statistics
                acc[0] += st.null_count
                if st.has_min_max:
                    acc[1] = st.min if acc[1] is None else min(acc[1], st.min)
                    acc[2] = st.max if acc[2] is None else max(acc[2], st.max)
    return {c: tuple(v) for c, v in out.items()}


def _by_rows(table: pa.Table) -> dict[str, tuple[Any, ...]]:
    """(nulls, min, max) per column, computed by DuckDB over the rows."""
    con = duckdb.connect()
    con.register("t", table)
    out: dict[str, tuple[Any, ...]] = {}
    for c in table.column_names:
        row = con.execute(f'select count(*) - count("{c}"), min("{c}"), max("{c}") from t').fetchone()
        assert row is not None
        out[c] = tuple(row)
    return out


def _dal(name: str) -> dict[str, tuple[Any, ...]]:
    return {c.name: (c.nulls, c.min, c.max) for c in lifecycle.stats(name).columns}


def test_stats_from_the_log_equal_footers_and_rows(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for k in range(6):
        write_deltalake(str(root), _batch(k), mode="append", partition_by=["part"])
    dal.register("x.log", str(root))
    got = _dal("x.log")
    rows = pa.concat_tables([_batch(k) for k in range(6)])
    expected = _by_rows(rows)
    footers = _by_footers(root, rows.column_names, ("part",))
    for c in rows.column_names:
        assert got[c] == expected[c], c
        if c != "part":
            assert got[c] == footers[c], c
    assert got["empty"] == (42, None, None)
    st = lifecycle.stats("x.log")
    assert st.exact and {c.name: c.distinct for c in st.columns}["part"] == 3

    # integers, floats, short strings, dates: the log states them for every file; no footer is opened
    narrow = tmp_path / "n"
    for k in range(6):
        write_deltalake(str(narrow), _batch(k).drop_columns(["long", "ts"]), mode="append", partition_by=["part"])
    dal.register("x.narrow", str(narrow))
    before = _dal("x.narrow")
    _spoil(_data_files(narrow))
    assert _dal("x.narrow") == before
    assert before == {c: v for c, v in got.items() if c not in ("long", "ts")}

    # truncated long strings and millisecond timestamps need the footers (here spoiled: the read fails)
    _spoil(_data_files(root))
    with pytest.raises(FormatError):
        lifecycle.stats("x.log")


def test_unindexed_columns_and_files_without_stats_read_footers(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), _batch(0), configuration={"delta.dataSkippingNumIndexedCols": "1"})
    for k in range(1, 4):
        write_deltalake(str(root), _batch(k), mode="append")
    dal.register("x.few", str(root))
    rows = pa.concat_tables([_batch(k) for k in range(4)])
    assert _dal("x.few") == _by_rows(rows)
    # only id is indexed: every other column needs every footer
    first = _data_files(root)[0]
    _spoil([first])
    with pytest.raises(FormatError):
        lifecycle.stats("x.few")


def test_deletion_vector_files_read_footers(sqlite_env: Catalog, tmp_path: Path) -> None:
    location = tmp_path / "dv"
    shutil.copytree(require_corpus() / "delta-golden" / "dv-partitioned-with-checkpoint", location)
    for p in [location, *location.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    dal.register("x.dv", str(location))
    st = lifecycle.stats("x.dv")
    assert not st.exact  # deletion vectors: counts are upper bounds, as the footers say
    names = [c.name for c in st.columns]
    parts = tuple(DeltaTable(str(location)).metadata().partition_columns)
    footers = _by_footers(location, names, parts)
    got = {c.name: (c.nulls, c.min, c.max) for c in st.columns}
    assert footers and all(got[c] == footers[c] for c in footers)
