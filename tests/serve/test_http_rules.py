"""ETags on pin / versions / show (304 on If-None-Match; the client keeps answers per URL), ``dal auth login /
whoami / logout`` (the token stored 0600, never printed), and the server's Host and Origin checks (JSON answers)."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog.auth import AuthStore
from dal.catalog.remote import RemoteCatalog
from dal.cli.app import cli
from tests.serve.conftest import Served


def test_etags_answer_304_and_change_with_the_content(served: Served, tmp_path: Path) -> None:
    for path in ("/api/v1/datasets/weather.radar/pin?version=0", "/api/v1/datasets/weather.radar/versions",
                 "/api/v1/datasets/weather.radar"):  # fmt: skip
        status, _raw, found = served.request("GET", path, "ns_reader")
        headers = {k.lower(): v for k, v in found.items()}
        tag = headers["etag"]
        assert status == 200 and tag.startswith('"') and "no-cache" in headers["cache-control"]
        again = served.request("GET", path, "ns_reader", headers={"If-None-Match": tag})
        assert again[0] == 304 and again[1] == b""
        assert served.request("GET", path, "ns_reader", headers={"If-None-Match": '"other"'})[0] == 200
    status, _, headers = served.request("GET", "/api/v1/datasets/weather.wind/pin", "owner")
    before = {k.lower(): v for k, v in headers.items()}["etag"]
    dal.write(pa.table({"id": [7], "v": ["x"]}), "weather.wind", catalog=served.db)
    status, _, headers = served.request(
        "GET", "/api/v1/datasets/weather.wind/pin", "owner", headers={"If-None-Match": before}
    )
    assert status == 200 and {k.lower(): v for k, v in headers.items()}["etag"] != before  # a new latest version


def test_the_client_revalidates_and_the_pin_is_audited_each_time(served: Served) -> None:
    client = RemoteCatalog(served.url, str(served.tokens["one_reader"]))
    first = client.pin("weather.radar", 0)
    assert len(client._etags) == 1
    assert client.pin("weather.radar", 0) == first  # answered 304: from the client's copy
    pins = [r for r in AuthStore(served.db).audit(principal="one_reader") if r.action == "pin" and r.version == 0]
    assert len(pins) >= 2


def _cli(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, env=env, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_auth_login_whoami_logout(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DAL_HOME", str(home))
    monkeypatch.delenv("DAL_TOKEN", raising=False)
    monkeypatch.delenv("DAL_TOKEN_FILE", raising=False)
    env = {"DAL_CATALOG_URL": served.url, "DAL_HOME": str(home)}
    token = str(served.tokens["writer"])
    code, out, err = _cli(["auth", "login"], env, "dal_0000000000000000_" + "x" * 43 + "\n")
    assert code == 1 and "valid bearer token" in err and not (home / "tokens").exists()  # nothing stored
    code, out, err = _cli(["auth", "login", "--json"], env, token + "\n")
    assert code == 0, err
    found = json.loads(out)
    path = Path(found["token_file"])
    assert found["principal"] == "writer" and token not in out + err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == token
    code, out, _ = _cli(["auth", "whoami"], env)
    assert code == 0 and out.splitlines() == [f"writer on {served.url}", "  WRITE on weather.*"]
    assert RemoteCatalog(served.url).whoami()[0] == "writer"  # the stored token, found without $DAL_TOKEN
    code, out, _ = _cli(["auth", "logout"], env)
    assert code == 0 and not path.exists()
    code, _, err = _cli(["auth", "whoami"], env)
    assert code == 1 and "valid bearer token" in err
    code, _, err = _cli(["--catalog", served.db, "auth", "whoami"], env)
    assert code == 1 and "dal serve catalog" in err


def test_a_token_file_from_the_environment_is_written_0600(served: Served, tmp_path: Path) -> None:
    target = tmp_path / "tok"
    env = {"DAL_CATALOG_URL": served.url, "DAL_TOKEN_FILE": str(target)}
    code, out, err = _cli(["auth", "login"], env, str(served.tokens["owner"]) + "\n")
    assert code == 0, err
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and str(served.tokens["owner"]) not in out


def _raw(served: Served, request: str) -> bytes:
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request.encode())
        answer = b""
        while chunk := s.recv(65536):  # Connection: close: until the server closes it
            answer += chunk
        return answer


def test_foreign_hosts_and_origins_are_refused_as_json(served: Served) -> None:
    answer = _raw(served, "GET /api/v1/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 421") and b'"type":"DalError"' in answer
    ok = _raw(served, "GET /api/v1/health HTTP/1.1\r\nHost: localhost:1\r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200")
    body = json.dumps({"properties": {"o": "x"}}).encode()
    headers = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    status, raw, _ = served.request("PATCH", "/api/v1/datasets/weather.radar", "owner", body, headers)
    assert status == 403 and json.loads(raw)["error"] == "a change from another origin is refused"
    same = {**headers, "Origin": served.url}
    assert served.request("PATCH", "/api/v1/datasets/weather.radar", "owner", body, same)[0] == 200
    assert served.request("GET", "/api/v1/datasets/weather.radar", "owner", None, headers)[0] == 200  # reads: fine
    status, raw, _ = served.request("PUT", "/api/v1/datasets", "owner", b"{}")
    assert status == 405 and json.loads(raw)["error"] == "no such route"
    status, raw, _ = served.request("POST", "/api/v1/datasets/weather.radar/tags", None, b"{}")
    assert status == 401 and json.loads(raw)["type"] == "NotAuthorized"
