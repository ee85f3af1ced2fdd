"""A schema change in the range: every row is projected onto the newest version's schema (new columns null),
with column mapping (physical names, a renamed partition column) read through the table's own mapping."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa

import dal
from tests.changes.helpers import changes
from tests.conformance.conftest import require_corpus


def test_a_merged_column_is_null_in_rows_written_before_it(tmp_path: Path) -> None:
    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    dal.write(pa.table({"id": [1, 2]}), "d", path=path, catalog=catalog)
    dal.write(pa.table({"id": [3], "y": ["new"]}), "d", schema_mode="merge", catalog=catalog)
    got = changes("d", catalog, None)
    assert got.column_names == ["id", "y", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(zip(got.column("id").to_pylist(), got.column("y").to_pylist(), strict=True)) == [
        (1, None), (2, None), (3, "new")]  # fmt: skip
    # read up to the version before the merge: that version's schema, no y
    assert changes("d", catalog, None, 0).column_names == ["id", "_change_type", "_commit_version",
                                                           "_commit_timestamp"]  # fmt: skip


def test_a_renamed_partition_column_of_a_column_mapped_table(tmp_path: Path) -> None:
    """table_with_partitioning_mapping (Databricks): column mapping by name, the partition column ``id``
    renamed ``newid`` at version 3; its files keep the physical name."""
    shutil.copytree(require_corpus() / "delta-rs/table_with_partitioning_mapping", tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("t", str(tmp_path / "table"), catalog=catalog, read_only=True)
    got = changes("t", catalog, None)
    assert got.select(["newid", "description", "_change_type", "_commit_version"]).to_pylist() == [
        {"newid": 1, "description": "Initial data", "_change_type": "insert", "_commit_version": 1},
        {"newid": 2, "description": "Additional data", "_change_type": "insert", "_commit_version": 4},
    ]
    assert changes("t", catalog, 1, 3).num_rows == 0  # a property and a rename change no row
