from __future__ import annotations

import os

import pytest

from dal.catalog import Catalog
from tests.conftest import use_catalog


@pytest.fixture
def cat(sqlite_or_served: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """dal's default catalog for the test: a fresh SQLite file, and the same test through ``dal serve`` (SQLite
    and PostgreSQL behind it); its warehouse a fresh directory."""
    return use_catalog(sqlite_or_served, tmp_path, monkeypatch)
