"""Change reads of corpus tables with deletion vectors and no change data feed (Spark and Databricks wrote
them; two column-mapped): between each pair of consecutive readable versions, the changes equal the multiset
difference of the full rows delta-rs reads at the two versions."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dal
from dal.formats.changes import FileChanges
from dal.read.changes import plan_changes
from tests.changes.helpers import changes, delta_rs_read, rows
from tests.conformance.conftest import require_corpus

DV_TABLES = [
    "delta-golden/log-replay-dv-key-cases",
    "delta-golden/dv-with-columnmapping",
    "delta-golden/dv-partitioned-with-checkpoint",
    "delta-kernel/basic-dv-no-checkpoint",
    "delta-rs/table-with-dv-small",
]


@pytest.mark.parametrize("table", DV_TABLES)
def test_changes_equal_the_difference_of_delta_rs_reads(table: str, tmp_path: Path) -> None:
    shutil.copytree(require_corpus() / table, tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("t", str(tmp_path / "table"), catalog=catalog, read_only=True)
    versions = [v for v in sorted(dal.get_catalog(catalog).versions("t"), key=lambda v: v.number) if not v.unavailable]
    assert len(versions) >= 2
    deletes_seen = 0
    for before, after in itertools.pairwise(versions):
        got = changes("t", catalog, before.number, after.number)
        columns = after.schema.names
        old = rows(delta_rs_read(tmp_path / "table", before.storage_version).select(columns), columns)  # type: ignore[arg-type]
        new = rows(delta_rs_read(tmp_path / "table", after.storage_version).select(columns), columns)  # type: ignore[arg-type]
        kinds = got.column("_change_type")
        assert rows(got.filter(pc.equal(kinds, "delete")), columns) == old - new, f"version {after.number}"
        assert rows(got.filter(pc.equal(kinds, "insert")), columns) == new - old, f"version {after.number}"
        deletes_seen += pc.sum(pc.equal(kinds, "delete")).as_py() or 0
    assert deletes_seen > 0


def test_a_deletion_vector_delete_reads_only_the_deleted_positions(tmp_path: Path) -> None:
    """log-replay-dv-key-cases: range(50) in one file, then three DELETEs by deletion vector (ids 0, 7, 14)."""
    shutil.copytree(require_corpus() / "delta-golden/log-replay-dv-key-cases", tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("t", str(tmp_path / "table"), catalog=catalog, read_only=True)
    cat = dal.get_catalog(catalog)
    plan = plan_changes(cat.get_dataset("t"), cat.versions("t"), 0)
    assert all(isinstance(u, FileChanges) and u.change_type == "delete" and u.file.only for u in plan.units)
    got = changes("t", catalog, 0)
    assert sorted(got.column("id").to_pylist()) == [0, 7, 14]
    assert got.column("_commit_version").to_pylist() == [1, 2, 3]
    assert pa.types.is_timestamp(got.schema.field("_commit_timestamp").type)
