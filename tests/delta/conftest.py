from __future__ import annotations

import os

import pytest

from catalog import Catalog


@pytest.fixture
def cat(catalog_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """A fresh catalog (SQLite and Postgres) and warehouse, used as dal's default for the test."""
    monkeypatch.setenv("DAL_CATALOG_URL", catalog_url)
    monkeypatch.setenv("DAL_WAREHOUSE", os.path.join(tmp_path, "warehouse"))
    return Catalog(catalog_url)
