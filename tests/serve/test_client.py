"""``DAL_CATALOG_URL=http://…``: dal.open and dal ls / show / versions through a running dal serve give what the
database URL gives (same rows, same JSON, same error types); writes need WRITE (tests/serve/test_writes.py); the audit
has the pins and refusals; hostile requests get 404 / 413, never a 500."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

import dal
from dal.catalog import CatalogError, CatalogUnavailable, DatasetNotFound, VersionNotFound
from dal.catalog.auth import AuthStore, NotAuthorized
from dal.catalog.remote import RemoteCatalog, RemoteNotSupported
from dal.cli.app import cli
from dal.errors import DalError
from tests.serve.conftest import Served, free_port


@pytest.fixture
def as_reader(served: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    """This test's process reads through the server as ``ns_reader`` (READ on weather.*)."""
    monkeypatch.setenv("DAL_CATALOG_URL", served.url)
    monkeypatch.setenv("DAL_TOKEN", str(served.tokens["ns_reader"]))
    return served


@pytest.mark.parametrize("ref", [None, 0, 1, "prod", "latest", "now"])
def test_open_through_the_server_reads_what_the_database_url_reads(as_reader: Served, ref: object) -> None:
    if ref == "now":
        ref = datetime.now(UTC)
    served = dal.open("weather.radar", ref)  # DAL_CATALOG_URL: the server
    direct = dal.open("weather.radar", ref, catalog=as_reader.db)
    assert served.version == direct.version
    assert served.to_arrow().equals(direct.to_arrow())
    assert served.to_arrow().num_rows == (5 if ref == 0 else 6)


def test_errors_are_the_database_urls_with_nothing_about_forbidden_datasets(as_reader: Served) -> None:
    with pytest.raises(DatasetNotFound) as forbidden:
        dal.open("sales.orders")
    with pytest.raises(DatasetNotFound) as missing:
        dal.open("sales.ordres")
    assert str(forbidden.value) == "dataset 'sales.orders' not found"  # for ns_reader it does not exist
    assert str(missing.value) == "dataset 'sales.ordres' not found"  # and no "did you mean 'sales.orders'"
    with pytest.raises(DatasetNotFound) as close:
        dal.open("weather.radr")
    with pytest.raises(DatasetNotFound) as close_direct:
        dal.open("weather.radr", catalog=as_reader.db)
    assert str(close.value) == str(close_direct.value)  # "did you mean 'weather.radar'?": it may read that one
    with pytest.raises(VersionNotFound) as vnf:
        dal.open("weather.radar", 7)
    with pytest.raises(VersionNotFound) as vnf_direct:
        dal.open("weather.radar", 7, catalog=as_reader.db)
    assert str(vnf.value) == str(vnf_direct.value)
    with pytest.raises(dal.catalog.InvalidName):
        dal.open("../etc/passwd")


def test_a_bad_token_is_not_authorized(as_reader: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    for who in ("revoked", "expired", "malformed"):
        monkeypatch.setenv("DAL_TOKEN", str(as_reader.tokens[who]))
        with pytest.raises(NotAuthorized, match="valid bearer token"):
            dal.open("weather.radar")
    monkeypatch.delenv("DAL_TOKEN")
    with pytest.raises(NotAuthorized) as e:
        dal.open("weather.radar")
    assert isinstance(e.value, DalError)


def test_writes_without_write_are_not_authorized(as_reader: Served, tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "t"), pa.table({"id": [1]}))
    for call in (
        lambda: dal.write(pa.table({"id": [1]}), "weather.radar"),
        lambda: dal.register("weather.new", str(tmp_path / "t")),
    ):
        with pytest.raises(NotAuthorized, match="needs WRITE"):
            call()
    with pytest.raises(RemoteNotSupported, match="not supported yet"):
        dal.get_catalog().upgrade()  # what the server does not offer is one clear error


def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_browsing_commands_through_the_server(as_reader: Served) -> None:
    env = {"DAL_CATALOG_URL": as_reader.url, "DAL_TOKEN": str(as_reader.tokens["ns_reader"])}
    code, out, _ = _cli("ls", "--json", env=env)
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["weather.radar", "weather.wind"]
    _, out_db, _ = _cli("--catalog", as_reader.db, "ls", "--json", "weather.*", env=env)
    assert json.loads(out) == json.loads(out_db)
    for args in (
        ["show", "weather.radar", "--json"],
        ["versions", "weather.radar", "--json"],
        ["show", "weather.wind"],
    ):
        served = _cli(*args, env=env)
        direct = _cli("--catalog", as_reader.db, *args, env=env)
        assert served[0] == direct[0] == 0 and served[1] == direct[1]
    code, out, err = _cli("show", "sales.orders", env=env)
    assert code == 1 and err == "dal: error: dataset 'sales.orders' not found\n"
    code, out, err = _cli("versions", "weather.radar", env={**env, "DAL_TOKEN": "nope"})
    assert code == 1 and err.startswith("dal: error: a valid bearer token is required")
    for args in (["tag", "weather.radar", "0", "x"], ["gc", "weather.radar"], ["drop", "weather.radar", "--yes"]):
        code, out, err = _cli(*args, env=env)
        assert code == 1 and "may not" in err and "Traceback" not in err, (args, err)


def test_pins_and_refusals_are_audited(served: Served) -> None:
    client = RemoteCatalog(served.url, str(served.tokens["one_reader"]))
    pinned = client.pin("weather.radar", "prod")[1]
    with pytest.raises(DatasetNotFound):
        client.pin("weather.wind")
    RemoteCatalog(served.url, str(served.tokens["revoked"]))
    with pytest.raises(NotAuthorized):
        RemoteCatalog(served.url, str(served.tokens["revoked"])).pin("weather.radar")
    store = AuthStore(served.db)
    rows = store.audit(principal="one_reader")
    pins = [r for r in rows if r.action == "pin" and r.outcome == "allowed" and r.dataset == "weather.radar"]
    assert pins and pins[-1].version == pinned.number and f"pid={os.getpid()}" in pins[-1].client
    assert any(r.dataset == "weather.wind" and r.outcome == "denied" and r.detail == "no READ" for r in rows)
    assert any(r.principal == "" and r.detail == "revoked token" for r in store.audit(dataset="weather.radar"))
    since = store.audit(principal="one_reader", since=pins[-1].at)
    assert since and all(r.at >= pins[-1].at for r in since)
    assert store.prune_audit(datetime.now(UTC)) >= len(rows)
    assert store.audit(principal="one_reader") == []
    store.close()


def test_an_unreachable_server_is_catalog_unavailable_after_retries() -> None:
    client = RemoteCatalog(f"http://127.0.0.1:{free_port()}", "dal_x", attempts=3, backoff=0.01)
    with pytest.raises(CatalogUnavailable, match=r"cannot be reached \(3 tries\)"):
        client.get_dataset("weather.radar")


@pytest.mark.parametrize(
    "name",
    [
        "x'; DROP TABLE dal_datasets;--",
        "weather.radar' OR '1'='1",
        "../../etc/passwd",
        "..%2F..%2Fetc",
        "%00",
        "weather.*",
        "a" * 5000,
        "😀",
        "weather.radar\n",
    ],
)
def test_hostile_names_are_404_never_500(served: Served, name: str) -> None:
    for path in ("", "/versions", "/pin", "/pin?version=x'--", "/pin?version=1e999&time=1", "/tags"):
        status, raw, _ = served.request("GET", f"/api/v1/datasets/{quote(name, safe='')}{path}", "owner")
        assert status in (400, 404), (name, path, status, raw)
    status, raw, _ = served.request("GET", f"/api/v1/datasets?pattern={quote(name, safe='')}&limit=x", "owner")
    assert status == 400 and b"invalid limit" in raw
    status, raw, _ = served.request("GET", f"/api/v1/datasets?pattern={quote(name, safe='')}", "owner")
    assert status == 200 or (status == 400 and len(name) > 1000), raw[:200]  # a pattern too long: 400


def test_the_audit_holds_no_control_characters(served: Served) -> None:
    """What a client sends (its X-Dal-Client header, a name) is kept printable: `dal audit` prints it."""
    hostile = "\x1b[2J\x1b]0;owned\x07"
    served.request(
        "GET", f"/api/v1/datasets/{quote('x' + hostile, safe='')}/pin", "nobody", headers={"X-Dal-Client": hostile}
    )
    rows = AuthStore(served.db).audit(principal="nobody")
    assert rows and all(not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in r.client + (r.dataset or "")) for r in rows)
    assert any("?[2J" in r.client for r in rows)


def test_oversized_bodies_are_413(served: Served) -> None:
    big = json.dumps({"name": "x" * 200_000}).encode()
    status, raw, _ = served.request("POST", "/api/v1/admin/principals", "owner", big)
    assert status == 413 and json.loads(raw)["error"].startswith("request body over")
    # streamed (chunked, no Content-Length): cut off too
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = (
            "POST /api/v1/admin/principals HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            f"Authorization: Bearer {served.tokens['owner']}\r\nContent-Type: application/json\r\n\r\n"
        )
        s.sendall(head.encode())
        chunk = b"x" * 32768
        try:
            for _ in range(8):
                s.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert served.request("GET", "/api/v1/health")[0] == 200  # still serving


def test_the_token_from_the_profile_file(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile of the config file names the server and a token file (the token stays out of the config)."""
    token_file = tmp_path / "team.token"
    token_file.write_text(str(served.tokens["one_reader"]) + "\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[catalogs.team]\nurl = "{served.url}"\ntoken_file = "{token_file}"\n')
    monkeypatch.setenv("DAL_CONFIG", str(config))
    monkeypatch.setenv("DAL_PROFILE", "team")
    monkeypatch.delenv("DAL_TOKEN", raising=False)
    assert dal.open("weather.radar").to_arrow().num_rows == 6
    code, out, err = _cli("ls", "--json", env={"DAL_CONFIG": str(config), "DAL_PROFILE": "team"})
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["weather.radar"], err
    token_file.unlink()
    with pytest.raises(CatalogError, match="cannot read the token file of the profile"):
        dal.open("weather.radar")


def test_transient_answers_are_retried_with_backoff() -> None:
    """502/503/504 are retried (then the answer is used); other 5xx are CatalogUnavailable at once."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answers = [503, 502, 200, 500]
    seen: list[str] = []

    class Flaky(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            status = answers.pop(0)
            body = b'{"tags": {"prod": 1}}' if status == 200 else b'{"error": "boom", "type": "DalError"}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = RemoteCatalog(f"http://127.0.0.1:{server.server_address[1]}", "dal_x", attempts=4, backoff=0.01)
        assert client.tags("weather.radar") == {"prod": 1}
        assert seen == ["/api/v1/datasets/weather.radar/tags"] * 3
        with pytest.raises(CatalogUnavailable, match="failed: boom"):
            client.tags("weather.radar")
        assert len(seen) == 4  # a 500 is not retried
    finally:
        server.shutdown()
        server.server_close()


def test_labels_through_the_server_are_the_database_urls(as_reader: Served) -> None:
    """The dataset's answer carries its labels (``dal show``, ``dal labels`` through the server read what the database
    URL reads); labelling through the server needs WRITE, a reader's is one clear refusal."""
    from dal.catalog import Catalog

    env = {"DAL_CATALOG_URL": as_reader.url, "DAL_TOKEN": str(as_reader.tokens["ns_reader"])}
    cat = Catalog(as_reader.db)
    cat.label("weather.radar", "gold")
    cat.label("weather.radar", "pii", column="v")
    try:
        assert RemoteCatalog(as_reader.url, env["DAL_TOKEN"]).labels("weather.radar") == cat.labels("weather.radar")
        for args in (["show", "weather.radar", "--json"], ["labels", "weather.radar"], ["show", "weather.radar"]):
            served = _cli(*args, env=env)
            direct = _cli("--catalog", as_reader.db, *args, env=env)
            assert served[0] == direct[0] == 0 and served[1] == direct[1], args
        assert json.loads(_cli("show", "weather.radar", "--json", env=env)[1])["labels"] == {
            "dataset": ["gold"],
            "columns": {"v": ["pii"]},
        }
        code, _, err = _cli("label", "weather.radar", "silver", env=env)
        assert code == 1 and "needs WRITE on it" in err and err.count("\n") == 1 and "Traceback" not in err
    finally:
        cat.unlabel("weather.radar", "gold")
        cat.unlabel("weather.radar", "pii", column="v")
        cat.close()
