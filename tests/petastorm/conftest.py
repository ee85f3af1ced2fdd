from __future__ import annotations

import os

import pytest

from catalog import Catalog


@pytest.fixture
def cat(sqlite_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    monkeypatch.setenv("DAL_CATALOG_URL", sqlite_url)
    monkeypatch.setenv("DAL_WAREHOUSE", os.path.join(tmp_path, "warehouse"))
    return Catalog(sqlite_url)
