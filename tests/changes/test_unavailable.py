"""A change read over history whose data is gone is one clear ``ChangesUnavailable``, never a partial answer:
versions ``dal gc`` expired (their files reclaimed), files a VACUUM removed behind the catalog's back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal import ScalarCodec, TensorField, TensorSchema
from dal.errors import ChangesUnavailable, DalError
from tests.changes.helpers import changes


def _table(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "x": pa.array([float(i) for i in ids])})


def test_delta_a_range_crossing_a_gc_expired_version_is_refused(tmp_path: Path) -> None:
    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    dal.write(_table(range(5)), "d", path=path, catalog=catalog)
    dal.write(_table(range(3, 8)), "d", mode="overwrite", catalog=catalog)
    dal.write(_table(range(8, 10)), "d", catalog=catalog)
    result = dal.lifecycle.gc("d", keep_last=2, catalog=catalog)
    assert result.expired == (0,) and result.deleted  # version 0's files are gone
    with pytest.raises(ChangesUnavailable, match="version 0"):
        changes("d", catalog, None)
    # version 1 overwrote version 0: its deletes are rows of files gc reclaimed
    with pytest.raises(ChangesUnavailable, match=r"version 1 removed rows of version 0"):
        changes("d", catalog, 0)
    got = changes("d", catalog, 1)  # after the gap: answered
    assert got.column("id").to_pylist() == [8, 9] and set(got.column("_change_type").to_pylist()) == {"insert"}
    assert isinstance(ChangesUnavailable("x"), DalError)


def test_delta_a_file_vacuumed_behind_the_catalogs_back_is_refused_when_read(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    dal.write(_table(range(5)), "d", path=path, catalog=catalog)
    dal.write(_table(range(3, 8)), "d", mode="overwrite", catalog=catalog)
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(ChangesUnavailable, match="is gone"):
        changes("d", catalog, 0)


def test_petastorm_a_range_crossing_a_gc_expired_version_is_refused(tmp_path: Path) -> None:
    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "p")
    schema = TensorSchema("P", [TensorField("id", np.int64, (), ScalarCodec())])
    dal.write({"id": list(range(4))}, "p", format="petastorm", schema=schema, path=path, catalog=catalog)
    dal.write({"id": list(range(2, 6))}, "p", format="petastorm", mode="overwrite", catalog=catalog)
    dal.write({"id": [9]}, "p", format="petastorm", catalog=catalog)
    assert dal.lifecycle.gc("p", keep_last=2, catalog=catalog).expired == (0,)
    with pytest.raises(ChangesUnavailable, match="version 0"):
        changes("p", catalog, None)
    with pytest.raises(ChangesUnavailable, match="version 0 cannot be read any more"):
        changes("p", catalog, 0)
    assert changes("p", catalog, 1).column("id").to_pylist() == [9]


def test_a_range_backwards_or_outside_the_history_is_refused(tmp_path: Path) -> None:
    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    dal.write(_table(range(2)), "d", path=path, catalog=catalog)
    dal.write(_table(range(2, 4)), "d", catalog=catalog)
    with pytest.raises(DalError, match="must not be after"):
        changes("d", catalog, 1, 0)
    with pytest.raises(DalError, match="no version 7"):
        changes("d", catalog, 7)
    assert changes("d", catalog, 1, 1).column_names == ["id", "x", "_change_type", "_commit_version",
                                                         "_commit_timestamp"]  # fmt: skip
