"""A dataset with more versions than its page shows: the page holds the newest MAX_HISTORY (and says so), the API
pages versions with ?limit=, and lineage on the page comes from the edge table (declared edges labelled)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dal.catalog import Catalog, Schema, VersionDraft
from dal.catalog.types import DECLARED, Field, Input
from dal.ui.app import MAX_HISTORY
from tests.ui.conftest import Server, start

EXTRA = 7


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui_many")
    url = f"sqlite:///{tmp}/catalog.db"
    cat = Catalog(url)
    schema = Schema((Field("id", "int64"),))
    cat.create_dataset("big.hist", format="delta", location="/data/big")
    cat.create_dataset("big.src", format="delta", location="/data/src")
    cat.publish("big.src", VersionDraft("create", schema, 1))
    for i in range(MAX_HISTORY + EXTRA):
        cat.publish("big.hist", VersionDraft("append", schema, i + 1))
    last = MAX_HISTORY + EXTRA - 1
    cat.record_lineage("big.hist", last, "lineage", {"time": "2026-01-01T00:00:00+00:00", "user": "u"},
                       [Input("big.src", 0, None, DECLARED)])  # fmt: skip
    cat.close()
    yield from start(url, Path(tmp))


def test_the_page_shows_the_newest_versions_and_says_how_many_there_are(many: Server) -> None:
    status, _, raw = many.get("/d/big.hist")
    page = raw.decode()
    assert status == 200
    total = MAX_HISTORY + EXTRA
    assert f"the newest {MAX_HISTORY:,} of {total:,} versions" in page
    assert f'<option value="{total - 1}" selected' in page and '<option value="0"' not in page
    assert 'href="/d/big.src?v=0"' in page and 'class="edge declared"' in page  # lineage from the edges
    status, _, raw = many.get("/d/big.hist?v=2")  # an older version than the page lists still opens
    assert status == 200 and "version 2" in raw.decode()


def test_the_versions_api_takes_a_limit(many: Server) -> None:
    status, body = many.json("/api/datasets/big.hist/versions?limit=3")
    total = MAX_HISTORY + EXTRA
    assert status == 200 and [v["version"] for v in body] == [total - 3, total - 2, total - 1]
    status, body = many.json("/api/datasets/big.hist/versions")
    assert status == 200 and len(body) == total


def test_a_long_history_is_a_paged_table_and_not_a_tab_stop_per_bar(many: Server) -> None:
    import re

    from dal.ui.app import VERSIONS_PER_PAGE

    total = MAX_HISTORY + EXTRA
    page = many.get("/d/big.hist")[2].decode()
    charts = re.findall(r'<svg id="(?:rows|bytes)-chart".*?</svg>', page, re.S)
    assert len(charts) == 2 and all("<a " not in c for c in charts)  # a link per bar was 2 x 500 tab stops
    assert page.count("<a ") < 60
    listed = [int(n) for n in re.findall(r'<tr[^>]*><td class="n"><a href="/d/big.hist\?v=(\d+)"', page)]
    assert listed == list(range(total - 1, total - 1 - VERSIONS_PER_PAGE, -1))  # newest first
    assert "versions page 1 of 20" in page and 'id="versions-older"' in page
    older = many.get("/d/big.hist?vpage=2")[2].decode()
    listed = [int(n) for n in re.findall(r'<tr[^>]*><td class="n"><a href="/d/big.hist\?v=(\d+)"', older)]
    assert listed == list(range(total - 1 - VERSIONS_PER_PAGE, total - 1 - 2 * VERSIONS_PER_PAGE, -1))
    assert many.get("/d/big.hist?vpage=999")[0] == 200  # past the end: the last page
