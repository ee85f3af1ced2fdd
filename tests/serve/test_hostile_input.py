"""Hostile and odd input against a real ``dal serve`` (issue #36, findings F4-F13): numbers beyond the columns'
ranges are a 404 or 400 (never a 503 naming the database), malformed bodies a 400 (never a 500), a name that
cannot exist a 400, refusals in plain words, no token secret in the audit, no audit flood from anonymous callers,
and a namespace manager's audit names nothing it may not read."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from dal.catalog import Catalog
from dal.catalog.auth import AuthStore
from dal.catalog.errors import VersionNotFound
from dal.cli.app import cli
from tests.serve.conftest import Served, http, populate, start, stop

HUGE = 99999999999999999999  # beyond 64 bits
BIG = 999999999999999999  # a BIGINT, beyond the INTEGER column of version numbers


def _post(served: Served, path: str, who: str, body: object) -> tuple[int, dict[str, object]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, answer, _ = served.request("POST", path, who, raw)
    return status, json.loads(answer)


def test_numbers_out_of_range_are_not_found_on_both_databases(
    catalog_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F4: on PostgreSQL these were 503 CatalogUnavailable naming the database URL (its INTEGER column refused)."""
    monkeypatch.setenv("DAL_HOME", str(tmp_path / "home"))
    tokens = populate(catalog_url, tmp_path)
    proc, base = start(catalog_url)
    served = Served(base, catalog_url, tokens, proc)
    try:
        api = "/api/v1/datasets/weather.radar"
        answers = {
            "upstream": served.request("GET", f"{api}/upstream?version={BIG}", "owner"),
            "pin": served.request("GET", f"{api}/pin?version={HUGE}", "owner"),
            "partitions": served.request("GET", f"{api}/partitions?version={BIG}", "owner"),
            "diff": served.request("GET", f"{api}/diff?old_version=0&new_version={BIG}", "owner"),
        }
        assert {k: v[0] for k, v in answers.items()} == dict.fromkeys(answers, 404)
        status, down, _ = served.request("GET", f"{api}/downstream?version={BIG}", "owner")
        assert (status, json.loads(down)) == (200, {"edges": []})
        changes = {
            "annotate": _post(served, f"{api}/annotate", "owner", {"key": "k", "number": HUGE, "value": 1}),
            "annotate-big": _post(served, f"{api}/annotate", "owner", {"key": "k", "number": BIG, "value": 1}),
            "lineage": _post(served, f"{api}/lineage", "owner", {"key": "lineage", "number": HUGE}),
        }
        assert {k: v[0] for k, v in changes.items()} == dict.fromkeys(changes, 404), changes
        assert _post(served, f"{api}/expire", "owner", {"reason": "r", "numbers": [HUGE, BIG]}) == (
            200,
            {"versions": []},
        )
        assert _post(served, f"{api}/annotate", "owner", {"key": "k", "numbers": [HUGE], "value": 1})[0] == 200
        for count in ("row_count", "file_count", "size_bytes", "storage_version"):
            draft = {"operation": "append", "row_count": 1, "schema": [], count: HUGE}
            status, body = _post(served, f"{api}/versions", "owner", draft)
            assert status == 400 and "<= 9223372036854775807" in str(body["error"]), (count, body)
        everything = json.dumps([[a[0], a[1].decode()] for a in answers.values()]) + json.dumps(changes)
        for secret in ("postgres", "sqlite", "catalog.db", "5432", "out of range"):
            assert secret not in everything
    finally:
        stop(proc)
    # the database URL: the same answers (`dal lineage` said "integer out of range" on PostgreSQL)
    direct = Catalog(catalog_url)
    with pytest.raises(VersionNotFound):
        direct.upstream("weather.radar", BIG)
    with pytest.raises(VersionNotFound):
        direct.annotate_version("weather.radar", HUGE, "k", 1)
    assert direct.downstream("weather.radar", HUGE) == []
    direct.close()
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "lineage", "weather.radar", str(BIG)])
    assert result.exit_code == 1 and f"version {BIG} of 'weather.radar' not found" in result.output


def test_an_unavailable_database_is_not_named_to_clients(tmp_path: Path) -> None:
    """F4: a served client hears that the server's database is unavailable, never its URL."""
    db = f"sqlite:///{tmp_path}/catalog.db"
    tokens = populate(db, tmp_path)
    proc, base = start(db)
    try:
        (tmp_path / "catalog.db").unlink()
        status, body, _ = http("GET", base + "/api/v1/datasets/weather.radar/versions", tokens["owner"])
    finally:
        out = stop(proc)
    assert status == 503 and str(tmp_path) not in body.decode() and "sqlite" not in body.decode(), body
    assert json.loads(body)["error"] == "the catalog server's database is unavailable; try again later"
    assert "catalog.db" in out  # the server's own log says which


def test_malformed_bodies_are_400_never_500(served: Served) -> None:
    """F7: deep nesting (RecursionError), 1e400 (OverflowError), NaN, floats for counts."""
    deep = b'{"a":' + b"[" * 30000 + b"]" * 30000 + b"}"
    assert served.request("POST", "/api/v1/admin/grants", "owner", deep)[0] == 400
    nested = b'{"a":' + b"[" * 100 + b"]" * 100 + b"}"  # parses, but deeper than any request needs
    status, answer = _post(served, "/api/v1/admin/grants", "owner", nested)
    assert status == 400 and "nested too deeply" in str(answer["error"])
    path = "/api/v1/datasets/weather.radar/versions"
    for raw in (b'{"operation":"append","row_count":1e400,"schema":[]}',
                b'{"operation":"append","row_count":NaN,"schema":[]}',
                b'{"operation":"append","row_count":1.5,"schema":[]}',
                b'{"operation":"append","row_count":true,"schema":[]}'):  # fmt: skip
        status, answer = _post(served, path, "writer", raw)
        assert status == 400 and answer["type"] == "CatalogError", (raw, answer)
    assert len(json.loads(served.request("GET", path, "owner")[1])["versions"]) == 2  # nothing recorded


def test_an_invalid_name_on_a_change_route_is_invalid_not_forbidden(served: Served) -> None:
    """F8: the writer holds WRITE on weather.*; 'weather.été' and a 300-character name cannot exist."""
    for name in ("weather.%C3%A9t%C3%A9", "weather." + "x" * 300):
        status, answer = _post(served, f"/api/v1/datasets/{name}", "writer", {"format": "delta", "location": "/x"})
        assert status == 400 and answer["type"] == "InvalidName", answer
    # refusals read as sentences
    refusals = {
        "tokens": served.request("GET", "/api/v1/admin/tokens", "ns_manager"),
        "grants": served.request("GET", "/api/v1/admin/grants", "writer"),
        "lineage": served.request("POST", "/api/v1/datasets/sales.orders/lineage", "writer", b'{"number":0}'),
    }
    said = {k: json.loads(v[1])["error"] for k, v in refusals.items()}
    assert said["tokens"] == "ns_manager may not list tokens: it needs MANAGE on '*'"
    assert said["grants"].startswith("writer may not list grants: ")
    assert said["lineage"] == "writer may not record lineage of 'sales.orders': it needs WRITE on it"


def test_a_token_pasted_as_a_name_leaves_no_secret_in_the_audit(served: Served) -> None:
    """F13: a token in a dataset name (``dal show <token>``) is stored with its secret masked."""
    token = str(served.tokens["ns_reader"])
    assert served.request("GET", f"/api/v1/datasets/{token}", "ns_reader")[0] == 404
    assert served.request("GET", f"/api/v1/datasets/x.{quote(token)}/pin", None)[0] == 401
    store = AuthStore(served.db)
    rows = [r for r in store.audit() if r.dataset and token.split("_")[1] in r.dataset]
    store.close()
    assert len(rows) == 2 and all(token not in f"{r.dataset} {r.detail}" for r in rows)
    assert all(r.dataset is not None and r.dataset.endswith("_***") for r in rows)


def test_anonymous_requests_do_not_flood_the_audit(served: Served) -> None:
    """F13: at most 20 audit rows a minute per peer, action and reason, then one note."""
    for _ in range(60):
        assert served.request("GET", "/api/v1/datasets/weather.wind/tags", None)[0] == 401
    store = AuthStore(served.db)
    rows = store.audit()
    store.close()
    tags = [r for r in rows if r.action == "tags" and r.principal == "" and r.dataset == "weather.wind"]
    notes = [r for r in rows if r.action == "unauthenticated"]
    assert len(tags) == 20 and len(notes) == 1 and "not audited" in notes[0].detail


def test_a_namespace_managers_audit_names_nothing_it_may_not_read(served: Served) -> None:
    """F5: ns_manager (MANAGE weather.*) sees the rows of its datasets, a rename's other name only if readable."""
    rename = "/api/v1/datasets/{}/rename"
    assert _post(served, rename.format("weather.wind"), "owner", {"new_name": "sales.hidden_rename"})[0] == 200
    try:  # a rename that fails says why, naming the other dataset
        assert _post(served, rename.format("weather.radar"), "owner", {"new_name": "sales.orders"})[0] == 400
        status, raw, _ = served.request("GET", "/api/v1/admin/audit?dataset=weather.wind", "ns_manager")
        assert status == 200 and b"hidden_rename" not in raw
        rows = [r for r in json.loads(raw)["audit"] if r["action"] == "rename"]
        assert rows and rows[-1]["detail"] == "to a dataset you may not read"
        raw = served.request("GET", "/api/v1/admin/audit?dataset=weather.radar", "ns_manager")[1]
        failed = [r for r in json.loads(raw)["audit"] if r["action"] == "rename" and r["outcome"] == "failed"]
        assert failed and b"sales.orders" not in raw
        status, raw, _ = served.request("GET", "/api/v1/admin/audit?dataset=weather.wind", "owner")
        assert b"to sales.hidden_rename" in raw  # the catalog's admin sees it all
    finally:
        assert _post(served, rename.format("sales.hidden_rename"), "owner", {"new_name": "weather.wind"})[0] == 200


@pytest.mark.parametrize("allowed", [[], ["dal.example.org"]])
def test_the_banner_names_an_address_clients_can_use(tmp_path: Path, allowed: list[str]) -> None:
    """D3: listening on 0.0.0.0 the banner said "clients: DAL_CATALOG_URL=https://0.0.0.0:PORT"."""
    from tests.serve.test_deploy import _self_signed

    db = f"sqlite:///{tmp_path}/c.db"
    Catalog(db).close()
    cert, key = _self_signed(tmp_path)
    extra = [a for name in allowed for a in ("--allowed-host", name)]
    for attempt in range(3):  # a free loopback port may be taken on another address of this shared machine
        try:
            proc, base = start(db, ["--host", "0.0.0.0", "--tls-cert", cert, "--tls-key", key, *extra], "https")
            break
        except AssertionError as e:
            if "Address already in use" not in str(e) or attempt == 2:
                raise
    banner = stop(proc).splitlines()[0]
    port = base.rsplit(":", 1)[1]
    name = allowed[0] if allowed else socket.getfqdn()
    assert f"serving the catalog on https://0.0.0.0:{port}/api/v1/" in banner
    assert f"clients: DAL_CATALOG_URL=https://{name}:{port} or another name of this machine)" in banner, banner
    assert f"web UI on https://{name}:{port}/" in banner and "0.0.0.0:{port}/ (sign in" not in banner


def test_the_cli_takes_huge_numbers_without_an_outage(catalog_url: str, tmp_path: Path) -> None:
    """F4, the CLI's integers: beyond the columns they are an empty answer or a not-found, never 'unavailable'."""
    populate(catalog_url, tmp_path)
    runs = {
        "versions": ["versions", "weather.radar", "--limit", str(HUGE)],
        "ls": ["ls", "--limit", str(HUGE)],
        "audit": ["audit", "--limit", str(HUGE)],
        "head": ["head", "weather.radar", "--version", str(HUGE)],
        "changes": ["changes", "weather.radar", "--since", str(BIG)],
        "lineage": ["lineage", "weather.radar", str(HUGE)],
    }
    said = {k: CliRunner().invoke(cli, ["--catalog", catalog_url, *args]) for k, args in runs.items()}
    for key, result in said.items():
        assert "internal error" not in result.output and "unavailable" not in result.output, (key, result.output)
        assert "out of range" not in result.output and "failed:" not in result.output, (key, result.output)
    assert said["versions"].exit_code == said["ls"].exit_code == said["audit"].exit_code == 0
    assert said["head"].exit_code == said["lineage"].exit_code == said["changes"].exit_code == 1
