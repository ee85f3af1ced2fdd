"""Opening a catalog to read creates nothing (issue #22/#27): ``dal.open`` on a missing SQLite catalog is a
``CatalogUnavailable`` naming it, and neither the file nor its folder appears; a write still creates it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.catalog.errors import CatalogUnavailable


def test_open_on_a_missing_catalog_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    with pytest.raises(CatalogUnavailable, match=r"no catalog at .*x\.db.*first write"):
        dal.open("a.b", catalog=f"sqlite:///{missing}")
    with pytest.raises(CatalogUnavailable, match=r"no catalog at"):
        Catalog(f"sqlite:///{missing}", must_exist=True)
    assert list(tmp_path.iterdir()) == []
    dal.write(pa.table({"a": [1]}), "a.b", catalog=f"sqlite:///{missing}", path=str(tmp_path / "data"))
    assert dal.open("a.b", catalog=f"sqlite:///{missing}").count() == 1
