"""``dal ui`` with a token: the ``?token=`` redirect that moves the token into a cookie stays on this server,
whatever the path looks like (issue #22: ``GET //evil.com/?token=…`` redirected to evil.com)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit

import pytest

from dal.catalog import Catalog
from tests.ui.conftest import Server, start

TOKEN = "hostile-test-token"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui_hostile")
    url = f"sqlite:///{tmp}/catalog.db"
    Catalog(url).close()
    yield from start(url, tmp, token=TOKEN)


def _raw_get(server: Server, target: str) -> tuple[int, str | None]:
    """Status and Location of ``GET target`` sent as is (no client-side normalising, no redirect followed)."""
    where = urlsplit(server.base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        conn.putrequest("GET", target, skip_host=True)
        conn.putheader("Host", where.netloc)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("location")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "target",
    [
        f"//evil.com/?token={TOKEN}",
        f"//evil.com?token={TOKEN}",
        f"///evil.com/x?token={TOKEN}&page=2",
        f"/\\evil.com/?token={TOKEN}",
        f"/%2F%2Fevil.com/?token={TOKEN}",
    ],
)
def test_the_token_redirect_stays_on_this_server(token_server: Server, target: str) -> None:
    status, location = _raw_get(token_server, target)
    assert status == 303, (status, location)
    assert location is not None and location.startswith("/") and not location.startswith(("//", "/\\"))
    assert urlsplit(urljoin(token_server.base + "/", location)).netloc == urlsplit(token_server.base).netloc
    assert "token=" not in location


def test_the_ordinary_redirect_keeps_the_path_and_query(token_server: Server) -> None:
    status, location = _raw_get(token_server, f"/d/x.y?token={TOKEN}&page=2")
    assert (status, location) == (303, "/d/x.y?page=2")
