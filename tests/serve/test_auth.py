"""``dal.catalog.auth`` on its own: privileges and targets, tokens stored as hashes and compared in constant time,
the admin CLI (dal principal / token / grant / revoke / grants / audit)."""

from __future__ import annotations

import hmac
import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from dal.catalog import Catalog, CatalogError
from dal.catalog.auth import MANAGE, READ, WRITE, AuthStore, Grant, NotAuthorized, allows, matches, validate_target
from dal.catalog.engine import make_engine
from dal.cli.app import cli


@pytest.fixture
def store(catalog_url: str) -> AuthStore:
    Catalog(catalog_url).close()
    return AuthStore(catalog_url)


def test_privileges_include_the_smaller_ones_and_targets_match_by_namespace() -> None:
    g = [Grant("p", WRITE, "weather.*")]
    assert allows(g, READ, "weather.radar") and allows(g, WRITE, "weather.a.b")
    assert not allows(g, MANAGE, "weather.radar")
    assert not allows(g, READ, "weatherx.radar") and not allows(g, READ, "weather")
    assert allows([Grant("p", MANAGE, "*")], WRITE, "anything.at_all")
    assert not allows([Grant("p", READ, "weather.radar")], READ, "weather.radar2")
    assert matches("weather.radar", "weather.radar") and not matches("weather.radar", "weather.radar.x")
    assert not allows([], READ, "weather.radar")  # default deny
    for bad in ("weather.**", "*.radar", "../x", "weather.", ""):
        with pytest.raises(CatalogError):
            validate_target(bad)


def test_tokens_are_stored_hashed_and_compared_in_constant_time(
    store: AuthStore, catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_principal("job", "service")
    text, token = store.create_token("job", expires_in=timedelta(hours=1))
    assert text.startswith(f"dal_{token.token_id}_") and len(text) == 4 + 16 + 1 + 43
    secret = text[len(f"dal_{token.token_id}_") :]
    engine = make_engine(catalog_url)
    with engine.connect() as c:
        stored = [tuple(r) for r in c.execute(sa.text("SELECT * FROM dal_tokens"))]
    engine.dispose()
    assert stored and secret not in repr(stored) and text not in repr(stored)
    calls: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr("dal.catalog.auth.hmac.compare_digest", spy)
    assert store.authenticate(text) == "job"
    assert len(calls) == 1
    with pytest.raises(NotAuthorized, match="unknown"):
        store.authenticate(text[:-1] + ("A" if text[-1] != "A" else "B"))  # right id, wrong secret
    with pytest.raises(NotAuthorized, match="unknown"):
        store.authenticate("dal_" + "0" * 16 + "_" + secret)  # unknown id: compared all the same
    assert len(calls) == 3
    with pytest.raises(NotAuthorized, match="malformed"):
        store.authenticate("Bearer " + text)
    store.revoke_token(token.token_id)
    with pytest.raises(NotAuthorized, match="revoked"):
        store.authenticate(text)
    expired, _ = store.create_token("job", expires_in=timedelta(seconds=-1))
    with pytest.raises(NotAuthorized, match="expired"):
        store.authenticate(expired)


def test_the_admin_commands(catalog_url: str) -> None:
    Catalog(catalog_url).close()

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--catalog", catalog_url, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    assert run("principal", "create", "alice") == "created user alice\n"
    assert run("principal", "create", "trainer", "--service") == "created service trainer\n"
    assert json.loads(run("principal", "list", "--json")) == [
        {"name": "alice", "kind": "user"},
        {"name": "trainer", "kind": "service"},
    ]
    token = json.loads(run("token", "create", "trainer", "--expires-days", "7", "--json"))
    assert token["token"].startswith("dal_") and token["principal"] == "trainer"
    listed = run("token", "list")
    assert token["token_id"] in listed and token["token"] not in listed  # the secret is shown once only
    assert run("grant", "trainer", "read", "weather.*") == "granted READ on weather.* to trainer\n"
    run("grant", "alice", "MANAGE", "*")
    assert json.loads(run("grants", "trainer", "--json")) == [
        {"principal": "trainer", "privilege": "READ", "target": "weather.*"}
    ]
    assert run("revoke", "trainer", "READ", "weather.*") == "revoked READ on weather.* from trainer\n"
    assert run("revoke", "trainer", "READ", "weather.*").startswith("no grant of READ on weather.*")
    assert run("token", "revoke", token["token_id"]) == f"revoked token {token['token_id']}\n"
    assert json.loads(run("token", "list", "--json"))[0]["revoked"] is True
    assert json.loads(run("audit", "--json", "--since", "2020-01-01")) == []
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "grant", "nobody", "READ", "x"])
    assert result.exit_code == 1 and result.stderr.startswith("dal: error: principal 'nobody' not found")
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "grant", "alice", "READ", "bad target/"])
    assert result.exit_code == 1 and "invalid dataset name" in result.stderr
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "principal", "create", "alice"])
    assert result.exit_code == 1 and "exists already" in result.stderr
    result = CliRunner().invoke(cli, ["--catalog", "http://127.0.0.1:1", "grants"])  # through the server's routes
    assert result.exit_code == 1 and "cannot be reached" in result.stderr
