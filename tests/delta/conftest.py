from __future__ import annotations

import os

import pytest

from dal.catalog import Catalog
from tests.conftest import use_catalog


@pytest.fixture
def cat(catalog_url_or_served: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """A fresh catalog (SQLite, Postgres, and through dal serve) and warehouse, used as dal's default for the test."""
    return use_catalog(catalog_url_or_served, tmp_path, monkeypatch)
