from __future__ import annotations

import pytest

from dal.catalog import Catalog


@pytest.fixture
def cat(sqlite_env: Catalog) -> Catalog:
    return sqlite_env
