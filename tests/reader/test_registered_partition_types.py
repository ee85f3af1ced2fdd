"""Partition columns of a registered Parquet directory: typed as the writer recorded them (a ``_common_metadata``
summary), as ``dal.register(partition_types=...)`` says, else from the directory names as pyarrow reads them —
never dates and timestamps as strings when the writer or the user said otherwise (issue #23, item 11). Hive's declared partition types:
tests/hive/test_hive.py::test_import_types_partitions_as_hive_declares_them."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError, DatasetNotFound

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("x", pa.float64()),
        ("day", pa.date32()),
        ("n", pa.int32()),
        ("code", pa.string()),
        ("at", pa.timestamp("us")),
    ]
)
PARTS = ["day", "n", "code", "at"]


def table() -> pa.Table:
    rows = [
        (i, i / 2, date(2024, 4, 1 + i % 3), i % 2, ["007", "12"][i % 2], datetime(2024, 4, 1, 6 * (i % 2)))
        for i in range(12)
    ]
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


def written(root: Path, *, summary: bool) -> Path:
    """A hive-partitioned directory as pyarrow writes it (the files hold no partition column), with the full
    schema in ``_common_metadata`` when ``summary``."""
    pq.write_to_dataset(table(), root, partition_cols=PARTS)
    if summary:
        pq.write_metadata(SCHEMA, root / "_common_metadata")
    return root


def reference(root: Path) -> list[dict[str, object]]:
    """pyarrow's own dataset reader, told the partition types: an independent reading of the directory."""
    partitioning = pads.partitioning(pa.schema([SCHEMA.field(p) for p in PARTS]), flavor="hive")
    got = pads.dataset(root, format="parquet", partitioning=partitioning).to_table()
    return sorted(got.select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])


def rows(ds: dal.Dataset) -> list[dict[str, object]]:
    return sorted(ds.to_arrow().select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])


def test_a_summary_file_types_the_partitions(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = written(tmp_path / "summary", summary=True)
    dal.register("pt.summary", str(root), format="parquet")
    ds = dal.open("pt.summary")
    assert [ds.arrow_schema().field(p).type for p in PARTS] == [SCHEMA.field(p).type for p in PARTS]
    assert rows(ds) == reference(root)
    assert ds.filter("day = '2024-04-02' AND n = 1").count() == sum(
        1 for r in reference(root) if r["day"] == date(2024, 4, 2) and r["n"] == 1
    )
    # the pinned version keeps the types it was registered with, whatever the summary says later
    pq.write_metadata(pa.schema([("day", pa.string()), ("n", pa.int64())]), root / "_common_metadata")
    assert dal.open("pt.summary").arrow_schema().field("day").type == pa.date32()


def test_partition_types_given_to_register(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = written(tmp_path / "given", summary=False)
    types = {"day": "date32", "n": "int32", "code": "string", "at": "timestamp[us]"}
    dal.register("pt.given", str(root), format="parquet", partition_types=types)
    ds = dal.open("pt.given")
    assert [ds.arrow_schema().field(p).type for p in PARTS] == [SCHEMA.field(p).type for p in PARTS]
    assert rows(ds) == reference(root)
    with pytest.raises(DalError, match=r"partition_types: 'datetime' \(at\) is not an Arrow type name"):
        dal.register("pt.bad", str(root), format="parquet", partition_types={"at": "datetime"})
    with pytest.raises(DalError, match=r"a partition value cannot be duration\[s\]"):
        dal.register("pt.bad", str(root), format="parquet", partition_types={"at": "duration[s]"})
    with pytest.raises(DatasetNotFound):
        dal.open("pt.bad")  # refused before the catalog heard of it


def test_without_a_record_the_directory_names_type_them(sqlite_env: Catalog, tmp_path: Path) -> None:
    """Nothing records the types: pyarrow's discovery from the names (integers int64, the rest strings, dates
    too: tests/petastorm/test_petastorm_dataset.py keeps that). register(partition_types=) says otherwise."""
    root = written(tmp_path / "names", summary=False)
    dal.register("pt.names", str(root), format="parquet")
    schema = dal.open("pt.names").arrow_schema()
    assert [schema.field(p).type for p in PARTS] == [pa.string(), pa.int64(), pa.int64(), pa.string()]
    got = rows(dal.open("pt.names"))
    assert [r["day"] for r in got] == [r["day"].isoformat() for r in reference(root)]  # type: ignore[attr-defined]
