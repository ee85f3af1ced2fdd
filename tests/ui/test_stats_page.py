"""The dataset page's column statistics never fail the page: a footer that cannot be read says why, and a
version of many files is computed only when asked (``?stats=1``). The app is driven in this process as an ASGI
server drives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dal
from dal import lineage
from dal.catalog import Catalog
from dal.ui import pages
from dal.ui.app import create_app
from tests.hostile.test_ui_paths import get


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    catalog = Catalog(f"sqlite:///{tmp_path}/catalog.db")
    lineage.clear_read_log()
    for day in range(3):  # three files, one per partition; a boolean's min and max come from the footers
        dal.write(pa.table({"d": [day] * 2, "x": [day, day + 10], "ok": [True, False]}), "s.t", partition_by=["d"],
                  path=str(tmp_path / "t"), catalog=catalog)  # fmt: skip
    return catalog


def page(app: Any, query: str = "") -> str:
    status, _, body, _ = get(app, "/d/s.t", query)
    assert status == 200
    return body.decode()


def test_unreadable_footer_says_why(cat: Catalog, tmp_path: Path) -> None:
    app = create_app(cat)
    assert 'id="column-stats"' in page(app)
    victim = next((tmp_path / "t").rglob("*.parquet"))
    victim.write_bytes(b"not parquet")
    shown = page(app)
    assert 'id="stats-error"' in shown and 'id="column-stats"' not in shown and "Parquet footer" in shown


def test_many_files_only_when_asked(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "MAX_STATS_FILES", 2)
    app = create_app(cat)
    deferred = page(app)
    assert 'id="stats-deferred"' in deferred and 'id="column-stats"' not in deferred
    assert 'id="column-stats"' in page(app, "stats=1")
