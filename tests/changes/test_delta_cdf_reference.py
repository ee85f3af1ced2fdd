"""Change reads of the corpus's change-data-feed tables equal delta-rs's ``load_cdf`` (the reference).

Each table is copied to a temp dir and registered read-only; for every start version the change read from the
catalog version before it equals ``load_cdf(starting_version=…)`` as a multiset of rows (data columns,
``_change_type``, and ``_commit_version`` mapped from the Delta version to the catalog's number).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.errors import ChangesUnavailable
from tests.changes.helpers import CHANGE_COLUMNS, changes, rows
from tests.conformance.conftest import require_corpus

CDF_TABLES = [
    "delta-rs/cdf-table",
    "delta-rs/cdf-table-non-partitioned",
    "delta-rs/cdf-table-with-cdc-and-dvs",
    "delta-rs/checkpoint-cdf-table",
    "delta-rs/simple_table_with_cdc",
    "delta-rs/cdc_ict_table",
]


def _registered(table: str, tmp_path: Path) -> tuple[Path, str]:
    corpus = require_corpus()
    shutil.copytree(corpus / table, tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("t", str(tmp_path / "table"), catalog=catalog, read_only=True)
    return tmp_path / "table", catalog


def _load_cdf(path: Path, start: int, end: int) -> pa.Table:
    from deltalake import DeltaTable

    reader = DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


@pytest.mark.parametrize("table", CDF_TABLES)
def test_changes_equal_delta_rs_load_cdf(table: str, tmp_path: Path) -> None:
    path, catalog = _registered(table, tmp_path)
    versions = sorted(dal.get_catalog(catalog).versions("t"), key=lambda v: v.number)
    readable = [v for v in versions if not v.unavailable]
    number_of = {v.storage_version: v.number for v in versions}
    newest = versions[-1]
    assert newest.storage_version is not None
    compared = 0
    # since None (from the first commit, where the whole history is readable) and since each readable version
    starts = ([None] if len(readable) == len(versions) else []) + [v.number for v in readable[:-1]]
    for since in starts:
        got = changes("t", catalog, since)
        first = 0 if since is None else versions[since].storage_version + 1  # type: ignore[operator]
        ref = _load_cdf(path, first, newest.storage_version)
        data = [c for c in ref.column_names if c not in CHANGE_COLUMNS]
        assert got.column_names == [*sorted(data, key=got.column_names.index), *CHANGE_COLUMNS]
        mapped = pa.array([number_of[v] for v in ref.column("_commit_version").to_pylist()], pa.int64())
        ref = ref.set_column(ref.column_names.index("_commit_version"), "_commit_version", mapped)
        columns = [*data, "_change_type", "_commit_version"]
        assert rows(got, columns) == rows(ref, columns), f"since {since}"
        compared += 1
        # every row is stamped with the time its catalog version was committed
        stamps = {v.number: v.created_at for v in versions}
        for version, stamp in zip(
            got.column("_commit_version").to_pylist(), got.column("_commit_timestamp").to_pylist(), strict=True
        ):
            assert stamp == stamps[version]
    assert compared == len(starts) >= 2


def test_a_range_over_commits_the_log_no_longer_holds_is_refused(tmp_path: Path) -> None:
    """checkpoint-cdf-table's log starts at a checkpoint at version 3: what versions 0-2 changed is unknown."""
    _, catalog = _registered("delta-rs/checkpoint-cdf-table", tmp_path)
    with pytest.raises(ChangesUnavailable, match="version 0"):
        changes("t", catalog, None)
    with pytest.raises(ChangesUnavailable, match="version 2"):
        changes("t", catalog, 1)
    assert changes("t", catalog, 3).num_rows > 0  # from the first readable version on: answered


def test_a_change_data_file_carries_update_images(tmp_path: Path) -> None:
    _, catalog = _registered("delta-rs/cdf-table", tmp_path)
    kinds = set(changes("t", catalog, None).column("_change_type").to_pylist())
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}
