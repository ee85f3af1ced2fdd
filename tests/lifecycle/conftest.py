from __future__ import annotations

import os

import pytest

from dal.catalog import Catalog
from tests.conftest import use_catalog


@pytest.fixture
def cat(sqlite_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """A fresh SQLite catalog and warehouse, dal's default for the test."""
    return use_catalog(sqlite_url, tmp_path, monkeypatch)


@pytest.fixture
def any_cat(catalog_url_or_served: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """As ``cat``, on SQLite, on the real PostgreSQL and through a ``dal serve`` catalog."""
    return use_catalog(catalog_url_or_served, tmp_path, monkeypatch)
