"""The JSON API of ``dal ui`` through the real server: same data as the CLI's --json, paginated search in the
database, read-only, escaped, no credentials, and the optional token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dal.cli.app import cli
from tests.ui.conftest import FILLER, HOSTILE, NAMED, SECRETS, Server, start

pytestmark = pytest.mark.slow


def cli_json(server: Server, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--catalog", server.catalog_url, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_endpoints_return_what_the_cli_prints(server: Server) -> None:
    name = "weather.radar"
    cases = {
        f"/api/datasets/{name}": ("show", name),
        f"/api/datasets/{name}/versions": ("versions", name),
        f"/api/datasets/{name}/schema": ("schema", name),
        f"/api/datasets/{name}/schema?version=prod": ("schema", name, "-v", "prod"),
        f"/api/datasets/{name}/diff?old=0&new=2": ("diff", name, "0", "2"),
        f"/api/datasets/{name}/partitions?version=1": ("partitions", name, "-v", "1"),
        "/api/datasets/vision.scans/schema": ("schema", "vision.scans"),
    }
    for path, args in cases.items():
        status, body = server.json(path)
        assert status == 200, (path, body)
        assert body == cli_json(server, *args), path


def test_schema_diff_partitions_tags_content(server: Server) -> None:
    _, schema = server.json("/api/datasets/vision.scans/schema")
    matrix = next(f for f in schema["fields"] if f["name"] == "matrix")
    assert (matrix["dtype"], matrix["shape"], matrix["codec"]) == ("float32", [3, 4], "ndarray")
    _, diff = server.json("/api/datasets/weather.radar/diff?old=0&new=2")
    assert [f["name"] for f in diff["added"]] == ["quality"] and diff["row_count"] == {"old": 40, "new": 240}
    _, parts = server.json("/api/datasets/weather.radar/partitions?version=2")
    assert parts["partition_columns"] == ["date"] and len(parts["partitions"]) == 3
    assert server.json("/api/datasets/weather.radar/tags") == (200, {"dataset": "weather.radar", "tags": {"prod": 1}})
    _, versions = server.json("/api/datasets/weather.radar/versions")
    assert [v["row_count"] for v in versions] == [40, 120, 240]


def test_listing_paginates_and_searches(server: Server) -> None:
    status, first = server.json("/api/datasets")
    total = FILLER + NAMED
    assert status == 200 and first["total"] == total and first["pages"] == 3 and len(first["datasets"]) == 50
    names = [d["name"] for d in first["datasets"]]
    assert names == sorted(names) and names[0] == "evil.ds"
    _, last = server.json("/api/datasets?page=3")
    assert len(last["datasets"]) == total - 100 and last["datasets"][-1]["name"] == "weather.radar"
    radar = last["datasets"][-1]
    assert (radar["latest_version"], radar["latest_row_count"]) == (2, 240) and radar["latest_size_bytes"] > 0
    _, beyond = server.json("/api/datasets?page=99")
    assert beyond["datasets"] == [] and beyond["total"] == total
    _, small = server.json("/api/datasets?per_page=7&page=2")
    assert [d["name"] for d in small["datasets"]] == [f"filler.ds_{i:03d}" for i in range(6, 13)]
    # substring of name or description, case-insensitive; globs on the name
    assert [d["name"] for d in server.json("/api/datasets?q=RADAR")[1]["datasets"]] == ["weather.radar"]
    assert [d["name"] for d in server.json("/api/datasets?q=hourly")[1]["datasets"]] == ["weather.radar"]
    assert server.json("/api/datasets?q=filler.ds_1*")[1]["total"] == 20
    # LIKE metacharacters in a search are literal: '%' and '_' match themselves only
    assert [d["name"] for d in server.json("/api/datasets?q=100%25")[1]["datasets"]] == ["odd.under_score"]
    assert [d["name"] for d in server.json("/api/datasets?q=r_s")[1]["datasets"]] == ["odd.under_score"]
    assert server.json("/api/datasets?q=%25")[1]["total"] == 1
    assert server.json("/api/datasets?q=%27%20OR%201%3D1%20--")[1]["total"] == 0


def test_preview_summarises_tensors(server: Server) -> None:
    status, body = server.json("/api/datasets/vision.scans/preview?rows=3")
    assert status == 200 and body["columns"] == ["id", "matrix", "thumb"] and len(body["rows"]) == 3
    assert body["rows"][0]["id"] == 0 and body["rows"][0]["matrix"].startswith("<float32[3, 4] (ndarray)")
    _, radar = server.json("/api/datasets/weather.radar/preview?version=0&rows=500")
    assert len(radar["rows"]) == 40 and set(radar["columns"]) == {"date", "station", "value"}


def test_errors_are_json_with_status(server: Server) -> None:
    status, body = server.json("/api/datasets/no.such")
    assert status == 404 and "no.such" in body["error"]
    status, body = server.json("/api/datasets/weather.radar/schema?version=99")
    assert status == 404 and "99" in body["error"]
    status, body = server.json("/api/datasets/weather.radar/diff?old=0")
    assert status == 400 and "new" in body["error"]
    status, body = server.json("/api/datasets?page=abc")
    assert status == 400 and "page" in body["error"]
    status, body = server.json("/api/datasets/bad%20name")
    assert status == 400 and "invalid dataset name" in body["error"]
    status, body = server.json("/api/datasets/filler.ds_000/preview")
    assert status in (400, 404) and "filler.ds_000" in body["error"]


def test_read_only(server: Server) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/", "/api/datasets", "/api/datasets/weather.radar", "/nowhere"):
            status, headers, _ = server.get(path, method=method)
            assert status == 405 and headers["allow"] == "GET, HEAD", (method, path)
            json_api = path.startswith("/api")  # the API answers its refusals in JSON, like its other errors
            assert headers["content-type"].startswith("application/json" if json_api else "text/plain"), path
    status, body = server.json("/api/datasets", method="DELETE")
    assert status == 405 and "read-only" in body["error"]
    assert server.get("/api/datasets", method="HEAD")[0] == 200
    assert server.json("/api/datasets/weather.radar/tags")[1]["tags"] == {"prod": 1}


def test_pages_escape_hostile_text_and_hide_credentials(server: Server) -> None:
    pages = [
        "/",
        "/?q=evil",
        "/d/evil.ds",
        "/api/datasets/evil.ds",
        "/api/datasets",
        "/d/no.such",
        "/d/evil.ds/diff?old=0&new=0",
    ]
    for path in pages:
        _, headers, body = server.get(path)
        text = body.decode()
        assert not any(s in text for s in SECRETS), path
        if "html" in headers["content-type"]:
            assert "<script>" not in text and "<img" not in text, path
            assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no scripts at all
    _, _, page = server.get("/d/evil.ds")
    text = page.decode()
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in text
    assert "s3://AKIAEXAMPLE:***@bucket/raw?X-Amz-Signature=***&amp;sig=***" in text
    assert "x&lt;y&gt;" in text
    _, body = server.json("/api/datasets/evil.ds")
    assert body["description"] == HOSTILE and "***" in body["location"]
    # a search term is echoed escaped
    _, _, found = server.get("/?q=%3Cscript%3E")
    assert "<script>" not in found.decode() and "&lt;script&gt;" in found.decode()


def test_loopback_only_answers_loopback_names(server: Server) -> None:
    assert server.get("/api/datasets", headers={"Host": "evil.example:80"})[0] == 400
    assert server.get("/api/datasets", headers={"Host": "localhost"})[0] == 200


@pytest.fixture(scope="module")
def token_server(sqlite_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from start(sqlite_server.catalog_url, Path(tmp_path_factory.mktemp("ui_token")), token="s3cr3t-t0ken")


def test_token(token_server: Server) -> None:
    status, body = token_server.json("/api/datasets")
    assert status == 401 and "a token is needed" in body["error"]  # JSON under /api
    assert token_server.get("/")[1]["content-type"].startswith("text/plain")
    assert token_server.get("/api/datasets", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert token_server.get("/api/datasets", headers={"Authorization": "Bearer s3cr3t-t0ken"})[0] == 200
    assert token_server.get("/", headers={"Cookie": "dal_ui_token=s3cr3t-t0ken"})[0] == 200
    assert token_server.get("/", headers={"Cookie": "dal_ui_token=nope"})[0] == 401
    # ?token= sets the cookie and redirects to the same page without the token in the URL
    import http.client

    conn = http.client.HTTPConnection(token_server.base.removeprefix("http://"), timeout=10)
    conn.request("GET", "/?q=radar&token=s3cr3t-t0ken")
    r = conn.getresponse()
    assert r.status == 303 and r.getheader("location") == "/?q=radar"
    assert "dal_ui_token=s3cr3t-t0ken" in (r.getheader("set-cookie") or "")
    assert "httponly" in (r.getheader("set-cookie") or "").lower()
    conn.close()


def test_a_dataset_without_versions(server: Server) -> None:
    status, _, page = server.get("/d/filler.ds_000")
    assert status == 200 and "has no versions yet" in page.decode()
    assert server.json("/api/datasets/filler.ds_000/versions") == (200, [])
    status, body = server.json("/api/datasets/filler.ds_000/schema")
    assert status == 404 and "no versions" in body["error"]


def test_hostile_parameters_are_echoed_escaped(server: Server) -> None:
    for path in (
        "/d/weather.radar?v=%3Cscript%3Ealert(1)%3C/script%3E",
        "/d/weather.radar/diff?old=0&new=%22%3E%3Cimg%20src=x%20onerror=alert(1)%3E",
        "/d/%3Cscript%3E",
    ):
        status, _, body = server.get(path)
        text = body.decode()
        assert status in (400, 404) and "<script>" not in text and "<img" not in text, path


def test_search_finds_columns_tags_owner_and_format(server: Server) -> None:
    def names(query: str) -> list[str]:
        status, body = server.json("/api/datasets?" + query)
        assert status == 200, body
        return [d["name"] for d in body["datasets"]]

    assert names("q=lane_mask") == ["vision.street_scenes"]  # a column of the latest version
    assert names("q=QUALITY") == ["weather.radar"]  # added in version 2, the latest
    assert names("q=perception") == ["vision.street_scenes"]  # the owner
    assert names("q=petastorm") == ["vision.scans", "vision.street_scenes"]  # the format
    assert names("q=staging") == ["vision.street_scenes"]  # a tag
    assert names("q=filler.ds_1*")[:2] == ["filler.ds_100", "filler.ds_101"]  # a glob is still on the name only


def test_facets_filter_and_count(server: Server) -> None:
    everything = cli_json(server, "ls", "--limit", "0")
    _, body = server.json("/api/datasets")
    by_format: dict[str, int] = {}
    for d in everything:
        by_format[d["format"]] = by_format.get(d["format"], 0) + 1
    assert body["facets"]["format"] == dict(sorted(by_format.items(), key=lambda kv: (-kv[1], kv[0])))
    assert body["facets"]["owner"]["perception-team"] == 1
    assert body["facets"]["tag"] == {"prod": 2, "staging": 1}
    _, body = server.json("/api/datasets?format=petastorm&tag=prod")
    assert [d["name"] for d in body["datasets"]] == ["vision.street_scenes"] and body["total"] == 1
    assert body["filters"] == {"format": "petastorm", "tag": "prod"}
    # a facet is counted under the other filters: choosing petastorm still shows the other formats with prod
    assert body["facets"]["format"] == {"delta": 1, "petastorm": 1}
    _, body = server.json("/api/datasets?column=Station")  # exact column name, any case
    assert [d["name"] for d in body["datasets"]] == ["weather.radar"]
    _, body = server.json("/api/datasets?owner=nobody")
    assert body["total"] == 0 and body["datasets"] == []


def test_sorting_by_size_rows_and_time(server: Server) -> None:
    everything = cli_json(server, "ls", "--limit", "0")  # dal ls --json has each latest version's size and rows
    for key, field in (("size", "latest_size_bytes"), ("rows", "latest_row_count")):
        with_data = [d for d in everything if d[field] is not None]
        expected = [d["name"] for d in sorted(with_data, key=lambda d: (-d[field], d["name"]))]
        _, body = server.json(f"/api/datasets?sort=-{key}&per_page=200")
        got = [d["name"] for d in body["datasets"]]
        assert got[: len(expected)] == expected, key
        assert all(d[field] is None for d in body["datasets"][len(expected) :])  # no versions yet: last
    _, body = server.json("/api/datasets?sort=-updated&per_page=200")
    stamps = [d["updated_at"] for d in body["datasets"]]
    assert stamps == sorted(stamps, reverse=True)
    status, body = server.json("/api/datasets?sort=colour")
    assert status == 400 and "sort must be one of" in body["error"]


def test_api_index_and_openapi_document(server: Server) -> None:
    from openapi_spec_validator import validate

    status, index = server.json("/api")
    assert status == 200 and index["openapi"] == "/api/openapi.json"
    status, doc = server.json("/api/openapi.json")
    assert status == 200
    validate(doc)  # the OpenAPI 3.1 schema, by openapi-spec-validator
    assert {e["path"] for e in index["endpoints"]} == set(doc["paths"])
    examples = {"name": "weather.radar", "v": "1"}
    required = {"/api/datasets/{name}/diff": "?old=0&new=2"}
    for path in doc["paths"]:
        concrete = path.replace("{name}", examples["name"]).replace("{v}", examples["v"]) + required.get(path, "")
        status, _ = server.json(concrete)
        assert status == 200, concrete


def test_preview_carries_png_thumbnails(server: Server) -> None:
    import base64

    import cv2
    import numpy as np

    from tests.ui.conftest import thumb

    _, body = server.json("/api/datasets/vision.scans/preview?rows=3")
    assert len(body["images"]) == 3 and set(body["images"][0]) == {"thumb"}  # only the image field
    uri = body["images"][1]["thumb"]
    assert uri.startswith("data:image/png;base64,")
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(uri.split(",", 1)[1]), np.uint8), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB), thumb(1))  # OpenCV, not dal, decodes it
    _, radar = server.json("/api/datasets/weather.radar/preview?rows=2")
    assert radar["images"] == [{}, {}]


def test_expired_versions_are_marked_and_offer_no_snippet(server: Server) -> None:
    status, _, raw = server.get("/d/vision.street_scenes?v=1")
    page = raw.decode()
    assert status == 200 and 'id="expired-note"' in page and "expired by dal gc" in page
    assert (
        "dal.open(&#34;vision.street_scenes&#34;, 1)" not in page and 'dal.open("vision.street_scenes", 1)' not in page
    )
    assert "dal.open(&#34;vision.street_scenes&#34;, 11)" in page or 'dal.open("vision.street_scenes", 11)' in page
    assert 'id="preview-link"' not in page
    status, _, raw = server.get("/d/vision.street_scenes")
    page = raw.decode()
    assert page.count('class="expired"') == 3 and 'id="version-status">files not checked' in page
