"""``dal ui`` with hostile paths (issue #32): a 40k-character path segment or version parameter is refused at once
(one request took ~7 s), and every ``/api/...`` answer, a path no route knows included, is JSON.

The app is driven as an ASGI server drives it (one HTTP request in, the response messages out), in this process:
uvicorn's HTTP parser refuses request lines over 16 KiB itself, before the app would see them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dal
from dal import lineage
from dal.catalog import Catalog
from dal.ui.app import create_app

LONG = "x" * 40_000


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("ui_paths")
    cat = Catalog(f"sqlite:///{tmp}/catalog.db")
    lineage.clear_read_log()  # reads earlier tests in this process made must not become a.b's upstream here
    dal.write(pa.table({"x": [1, 2, 3]}), "a.b", path=str(Path(tmp, "ab")), catalog=cat)
    return create_app(cat)


def get(app: Any, path: str, query: str = "") -> tuple[int, dict[str, str], bytes, float]:
    """Status, headers, body and seconds of ``GET path?query`` (on a loopback host, as the browser sends it)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8765")], "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8765)}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    start = time.perf_counter()
    asyncio.run(app(scope, receive, send))
    took = time.perf_counter() - start
    headers = {k.decode().lower(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:]), took


@pytest.mark.parametrize(
    "path",
    [
        f"/api/datasets/{LONG}",
        f"/api/datasets/{LONG}/versions",
        f"/api/datasets/{LONG}/schema",
        f"/api/datasets/a.b/versions/{LONG}/lineage",
        f"/d/{LONG}",
        f"/d/{LONG}/preview",
    ],
    ids=lambda p: p.replace(LONG, "LONG"),
)
def test_a_40k_path_segment_is_refused_at_once(app: Any, path: str) -> None:
    status, headers, body, took = get(app, path)
    assert status == 404 and took < 1.0, (status, took)
    assert len(body) < 20_000 and LONG[:2000] not in body.decode()
    if path.startswith("/api/"):
        assert headers["content-type"] == "application/json"
        assert "longer than 1000 characters" in json.loads(body)["error"]
    else:
        assert headers["content-type"].startswith("text/html") and b"longer than 1000 characters" in body


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/datasets/a.b/schema", f"version={LONG}"),
        ("/api/datasets/a.b/diff", f"old=0&new={LONG}"),
        ("/api/datasets/a.b/preview", f"version={LONG}"),
        ("/d/a.b", f"v={LONG}"),
    ],
)
def test_a_40k_version_parameter_is_refused_at_once(app: Any, path: str, query: str) -> None:
    status, _headers, body, took = get(app, path, query)
    assert status == 400 and took < 1.0 and b"at most 1000 characters" in body, (status, took, body[:300])


def test_ordinary_paths_still_answer(app: Any) -> None:
    assert get(app, "/api/datasets/a.b")[0] == 200
    status, _h, body, _t = get(app, "/d/a.b", "v=0")
    assert status == 200, body.decode()[-3000:]
    status, _h, body, _t = get(app, "/api/datasets/a.b/versions/0/lineage")
    assert status == 200 and json.loads(body)["dataset"] == "a.b"


@pytest.mark.parametrize(
    "path",
    ["/api/nope", "/api/datasets/a.b/nope", "/api/datasets/a.b/versions/0/nope", "/api/openapi.yaml", f"/api/{LONG}"],
    ids=lambda p: p.replace(LONG, "LONG"),
)
def test_an_unknown_api_path_answers_json(app: Any, path: str) -> None:
    status, headers, body, _took = get(app, path)
    assert status == 404 and headers["content-type"] == "application/json", (status, headers)
    assert json.loads(body) == {"error": "no such API endpoint (GET /api lists them)"}
    assert headers["x-content-type-options"] == "nosniff"  # the guard's headers, as on every answer


def test_unknown_pages_and_slashes_are_as_before(app: Any) -> None:
    assert get(app, "/nope")[:3:2] == (404, b"Not Found")
    status, headers, _body, _took = get(app, "/api/datasets/")  # Starlette's redirect to the path without it
    assert status == 307 and headers["location"].endswith("/api/datasets")
