"""The ``dal serve`` client keeps its token where it belongs (issue #36, findings F6, F9-F12): no redirect is
followed (the token would go along), a URL with user info is refused with the token masked, a token no request can
carry is a local error, ``--profile X`` uses X's own token file, and the token commands refuse what they cannot
mean and say which tokens expired."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from dal.catalog import Catalog, CatalogError, CatalogUnavailable
from dal.catalog.auth import AuthStore, NotAuthorized
from dal.catalog.remote import RemoteCatalog
from dal.cli.app import cli
from tests.serve.conftest import Served


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``redirect_to`` (302) when the server has one, else 200 ``{}``; records the
    Authorization header of each request it got."""

    def do_GET(self) -> None:
        server = self.server
        server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        target = server.redirect_to  # type: ignore[attr-defined]
        self.send_response(302 if target else 200)
        if target:
            self.send_header("Location", target + self.path)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def _stub(redirect_to: str | None = None) -> tuple[http.server.HTTPServer, str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    server.redirect_to = redirect_to  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def stubs() -> Iterator[tuple[http.server.HTTPServer, str, http.server.HTTPServer, str]]:
    """A loopback server that redirects every request to another one, which records what it gets."""
    other, other_url = _stub()
    front, front_url = _stub(redirect_to=other_url.replace("127.0.0.1", "localhost"))
    yield front, front_url, other, other_url
    for s in (front, other):
        s.shutdown()
        s.server_close()


TOKEN = "dal_0123456789abcdef_" + "S" * 43


def test_a_redirect_is_not_followed_and_the_token_stays(stubs: tuple) -> None:  # type: ignore[type-arg]
    """F10: urllib copied the Authorization header to the redirect's target, another origin."""
    front, front_url, other, other_url = stubs
    with pytest.raises(CatalogUnavailable) as refused:
        RemoteCatalog(front_url, TOKEN, attempts=1).list_datasets()
    port = other_url.rsplit(":", 1)[1]
    assert f"redirect (302) to http://localhost:{port}" in str(refused.value)
    assert "dal does not follow redirects" in str(refused.value) and TOKEN not in str(refused.value)
    assert front.seen == [f"Bearer {TOKEN}"]  # type: ignore[attr-defined]
    assert other.seen == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [TOKEN + "\nfoo", TOKEN + "\x00", "dal_x y"])
def test_a_token_no_request_can_carry_is_a_local_error(stubs: tuple, bad: str) -> None:  # type: ignore[type-arg]
    """F9: it was 'cannot be reached (4 tries): Invalid header value b'Bearer <the secret>...''."""
    front, front_url, _other, _ = stubs
    with pytest.raises(NotAuthorized) as refused:
        RemoteCatalog(front_url, bad).list_datasets()
    assert "newline, a space or a control character" in str(refused.value)
    assert "S" * 10 not in str(refused.value)
    assert front.seen == []  # type: ignore[attr-defined]  # nothing sent, nothing retried


def test_a_token_in_the_url_is_refused_and_never_printed(tmp_path: Path) -> None:
    """F6: the token as user info was printed in full (only user:password was masked)."""
    url = f"http://{TOKEN}@127.0.0.1:9"
    with pytest.raises(CatalogError) as refused:
        RemoteCatalog(url)
    assert str(refused.value).startswith("the catalog server URL http://***@127.0.0.1:9 carries user info")
    result = CliRunner().invoke(cli, ["ls"], env={"DAL_CATALOG_URL": url, "DAL_HOME": str(tmp_path)})
    assert result.exit_code == 1 and "S" * 10 not in result.output and "carries user info" in result.output
    result = CliRunner().invoke(cli, ["ls"], env={"DAL_CATALOG_URL": f"http://x:{TOKEN}@127.0.0.1:9"})
    assert "S" * 10 not in result.output


def test_token_create_refuses_nan_days_and_token_list_marks_expired(tmp_path: Path) -> None:
    """F11: nan was an internal error (ValueError); an expired token looked like a live one."""
    db = f"sqlite:///{tmp_path}/c.db"
    Catalog(db).close()
    store = AuthStore(db)
    store.create_principal("dave")
    _, old = store.create_token("dave", expires_in=timedelta(seconds=-1))
    _, live = store.create_token("dave", expires_in=timedelta(days=1))
    store.close()
    for days in ("nan", "NaN", "inf", "-1"):
        result = CliRunner().invoke(cli, ["--catalog", db, "token", "create", "dave", "--expires-days", days])
        assert result.exit_code in (1, 2) and "internal error" not in result.output, (days, result.output)
    result = CliRunner().invoke(cli, ["--catalog", db, "token", "list"])
    lines = dict(line.split("\t", 1) for line in result.output.splitlines())
    assert lines[old.token_id].endswith("\texpired") and not lines[live.token_id].endswith("expired")
    listed = json.loads(CliRunner().invoke(cli, ["--catalog", db, "token", "list", "--json"]).output)
    assert {t["token_id"]: t["expired"] for t in listed} == {old.token_id: True, live.token_id: False}


def test_profiles_sharing_a_server_use_their_own_token_files(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F12: --profile admin used the first profile's (readonly's) token file, and login/logout touched it."""
    readonly, admin = tmp_path / "readonly.tok", tmp_path / "admin.tok"
    readonly.write_text(str(served.tokens["ns_reader"]) + "\n")
    admin.write_text(str(served.tokens["owner"]) + "\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[catalogs.readonly]\nurl = "{served.url}"\ntoken_file = "{readonly}"\n'
        f'[catalogs.admin]\nurl = "{served.url}"\ntoken_file = "{admin}"\n'
        f'[catalogs.bare]\nurl = "{served.url}"\n'
    )
    for var in ("DAL_TOKEN", "DAL_TOKEN_FILE", "DAL_CATALOG_URL", "DAL_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    env = {"DAL_CONFIG": str(config), "DAL_HOME": str(tmp_path / "home")}

    def dal(*args: str, stdin: str | None = None) -> str:
        return CliRunner().invoke(cli, list(args), env=env, input=stdin).output

    assert dal("--profile", "admin", "auth", "whoami").startswith("owner on ")
    assert dal("--profile", "readonly", "auth", "whoami").startswith("ns_reader on ")
    assert "a valid bearer token is required" in dal("--profile", "bare", "auth", "whoami")  # borrows none
    assert CliRunner().invoke(cli, ["auth", "whoami"], env={**env, "DAL_PROFILE": "admin"}).output.startswith("owner")
    said = dal("--profile", "admin", "auth", "login", stdin=str(served.tokens["writer"]) + "\n")
    assert f"as writer (token in {admin})" in said
    assert readonly.read_text().strip() == served.tokens["ns_reader"]
    assert dal("--profile", "admin", "auth", "whoami").startswith("writer on ")
    dal("--profile", "admin", "auth", "logout")
    assert not admin.exists() and readonly.exists()
