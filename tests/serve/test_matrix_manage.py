"""The authorization matrix of the admin routes for managers of less than ``*``: MANAGE on a namespace
(``weather.*``, ``weather.sub.*``) or on one dataset lets a principal grant, revoke, list grants and read audit rows
within it, and nothing outside it (a target outside, or a wider one, is refused 403 and audited, one answer whether
or not a dataset exists there). Every cell asserted against ``within``'s model, checked by an independent reading of
the catalog database; then the same through the CLI (``dal grant`` … against the server's URL with a token)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog.auth import AuthStore, Grant
from dal.cli.app import cli
from tests.serve.conftest import Served

# managers of less than everything, and callers that manage nothing (grants: privilege, target)
CALLERS: dict[str, list[tuple[str, str]]] = {
    "owner": [("MANAGE", "*")],
    "ns_manager": [("MANAGE", "weather.*")],
    "sub_manager": [("MANAGE", "weather.sub.*")],
    "radar_manager": [("MANAGE", "weather.radar")],
    "ns_reader": [("READ", "weather.*")],
    "writer": [("WRITE", "weather.*")],
    "nobody": [],
}
# what each caller manages, written out by hand (not computed with the code under test)
MANAGED = {
    "owner": {"weather.radar", "weather.wind", "weather.sub.z", "weather.sub.*", "weather.*", "weatherX.y",
              "weatherX.*", "weather*", "sales.orders", "sales.ordres", "*"},
    "ns_manager": {"weather.radar", "weather.wind", "weather.sub.z", "weather.sub.*", "weather.*"},
    "sub_manager": {"weather.sub.z", "weather.sub.*"},
    "radar_manager": {"weather.radar"},
}  # fmt: skip
TARGETS = sorted(MANAGED["owner"])
EXTRA_DATASETS = ("weather.sub.z", "weatherX.y")  # besides the conftest's weather.radar, weather.wind, sales.orders


@pytest.fixture(scope="module")
def tokens(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("manage")
    old = os.environ.get("DAL_HOME")
    os.environ["DAL_HOME"] = str(root / "home")
    try:
        for name in EXTRA_DATASETS:
            dal.write(pa.table({"id": [1]}), name, path=str(root / name), catalog=served.db)
    finally:
        if old is None:
            os.environ.pop("DAL_HOME", None)
        else:
            os.environ["DAL_HOME"] = old
    store = AuthStore(served.db)
    out: dict[str, str] = {}
    for who, grants in CALLERS.items():
        if who not in served.tokens:
            store.create_principal(who)
            for privilege, target in grants:
                store.grant(who, privilege, target)
        out[who] = store.create_token(who, expires_in=timedelta(days=1))[0]
    store.create_principal("grantee")
    store.close()
    yield out


def _request(
    served: Served, tokens: dict[str, str], method: str, path: str, who: str, body: object = None
) -> tuple[int, Any]:
    from tests.serve.conftest import http

    data = None if body is None else json.dumps(body).encode()
    status, raw, _ = http(method, served.url + path, tokens[who], data, {"Content-Type": "application/json"})
    return status, json.loads(raw)


def _expected(who: str, target: str) -> int:
    if target not in MANAGED.get(who, set()):
        return 403
    return 400 if target == "weather*" else 200  # not a target at all: the catalog's own answer (owner only)


def test_grant_and_revoke_cell_by_cell(served: Served, tokens: dict[str, str]) -> None:
    store = AuthStore(served.db)
    cells: list[tuple[str, str, str, int, int]] = []  # (caller, action, target, expected, actual)
    bodies: dict[tuple[str, str, str], dict[str, object]] = {}
    for who, target, privilege in itertools.product(CALLERS, TARGETS, ("READ", "MANAGE")):
        body = {"principal": "grantee", "privilege": privilege, "target": target}
        denied_before = len([r for r in store.audit(principal=who, limit=100_000) if r.outcome == "denied"])
        status, answer = _request(served, tokens, "POST", "/api/v1/admin/grants", who, body)
        bodies[who, "grant", target] = answer
        cells.append((who, "grant", target, _expected(who, target), status))
        held = Grant("grantee", privilege, target) in store.grants("grantee")  # the database, not the server
        cells.append((who, "granted", target, 200 if _expected(who, target) == 200 else 403, 200 if held else 403))
        status, answer = _request(served, tokens, "POST", "/api/v1/admin/grants/revoke", who, body)
        bodies[who, "revoke", target] = answer
        cells.append((who, "revoke", target, _expected(who, target), status))
        if held:  # a refused revoke leaves it; take it back as the owner for the next cell
            still = Grant("grantee", privilege, target) in store.grants("grantee")
            cells.append((who, "revoked", target, 200, 403 if still else 200))
            store.revoke("grantee", privilege, target)
        denied = [r for r in store.audit(principal=who, limit=100_000) if r.outcome == "denied"]
        if _expected(who, target) == 403:  # both refusals audited, naming the target
            assert len(denied) == denied_before + 2 and {r.dataset for r in denied[-2:]} == {target}, (who, target)
            assert {r.action for r in denied[-2:]} == {"grant", "revoke"}
        else:
            assert len(denied) == denied_before
    wrong = [c for c in cells if c[3] != c[4]]
    assert wrong == [], wrong[:20]
    assert not [c for c in cells if c[4] < 300 and c[3] >= 300] and not [c for c in cells if c[4] >= 500]
    assert store.grants("grantee") == []
    assert len([c for c in cells if c[1] in ("grant", "revoke")]) == len(CALLERS) * len(TARGETS) * 2 * 2 == 308
    # an outside dataset that exists and one that does not: the one answer (but for the name)
    for who in ("ns_manager", "sub_manager", "radar_manager", "ns_reader", "nobody"):
        for action in ("grant", "revoke"):
            f, m = bodies[who, action, "sales.orders"], bodies[who, action, "sales.ordres"]
            assert json.dumps(f).replace("orders", "X") == json.dumps(m).replace("ordres", "X")
    store.close()


def test_grants_and_audit_hold_only_what_lies_within(served: Served, tokens: dict[str, str]) -> None:
    store = AuthStore(served.db)
    for target in ("weather.wind", "weather.sub.*", "weatherX.y", "weatherX.*", "sales.orders", "*"):
        store.grant("grantee", "READ", target)
    # audit rows for datasets inside and outside every scope (pins, as the owner)
    for name in ("weather.wind", "weather.sub.z", "weatherX.y", "sales.orders"):
        assert _request(served, tokens, "GET", f"/api/v1/datasets/{name}/pin", "owner")[0] == 200
    everything = store.grants()
    rows = store.audit(limit=100_000)
    for who in CALLERS:
        status, answer = _request(served, tokens, "GET", "/api/v1/admin/grants", who)
        mine = MANAGED.get(who)
        if mine is None:
            assert status == 403, who
        else:
            assert status == 200, who
            shown = {(g["principal"], g["privilege"], g["target"]) for g in answer["grants"]}
            assert shown == {(g.principal, g.privilege, g.target) for g in everything if g.target in mine}, who
        status, answer = _request(served, tokens, "GET", "/api/v1/admin/audit?limit=100000", who)
        if mine is None:
            assert status == 403, who
            continue
        assert status == 200, who
        got = [(r["action"], r["dataset"], r["outcome"]) for r in answer["audit"]]
        wanted = [(r.action, r.dataset, r.outcome) for r in rows if who == "owner" or r.dataset in mine]
        assert got[: len(wanted)] == wanted, who
        assert all(d in mine for _a, d, _o in got) or who == "owner"
        for name in ("weather.sub.z", "weatherX.y", "sales.orders", "sales.ordres"):
            status, answer = _request(served, tokens, "GET", f"/api/v1/admin/audit?dataset={name}", who)
            assert status == (200 if name in mine else 403), (who, name)
            if status == 200:
                assert {r["dataset"] for r in answer["audit"]} <= {name}
    assert len([r for r in rows if r.dataset == "weatherX.y"]) > 0 and "weatherX.y" not in MANAGED["ns_manager"]
    for target in ("weather.wind", "weather.sub.*", "weatherX.y", "weatherX.*", "sales.orders", "*"):
        store.revoke("grantee", "READ", target)
    store.close()


def _cli(served: Served, token: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DAL_CATALOG_URL": served.url, "DAL_TOKEN": token})
    return result.exit_code, result.stdout, result.stderr


def test_the_admin_commands_through_the_server(served: Served, tokens: dict[str, str]) -> None:
    ns = tokens["ns_manager"]
    assert _cli(served, ns, "grant", "grantee", "read", "weather.wind") == (
        0, "granted READ on weather.wind to grantee\n", "")  # fmt: skip
    code, _out, err = _cli(served, ns, "grant", "grantee", "READ", "weatherX.y")
    assert code == 1 and "ns_manager may not grant: it needs MANAGE on 'weatherX.y' or around it" in err
    assert _cli(served, ns, "grants", "grantee")[:2] == (0, "grantee\tREAD\tweather.wind\n")
    # a principal's name it gets wrong: no close names (only MANAGE on '*' may list the principals)
    code, _out, err = _cli(served, ns, "grant", "grante", "READ", "weather.wind")
    assert (code, err) == (1, "dal: error: principal 'grante' not found\n")
    code, _out, err = _cli(served, tokens["owner"], "grant", "grante", "READ", "weather.wind")
    assert code == 1 and "did you mean 'grantee'" in err
    code, _out, err = _cli(served, ns, "audit", "--dataset", "sales.orders")
    assert code == 1 and "MANAGE on 'sales.orders'" in err
    code, out, _err = _cli(served, ns, "audit", "--dataset", "weather.wind", "--json")
    assert code == 0 and [r["action"] for r in json.loads(out)][-1:] == ["grant"]
    for args in (("principal", "create", "x"), ("principal", "list"), ("token", "create", "grantee"),
                 ("token", "list"), ("token", "revoke", "00000000000000ff")):  # fmt: skip
        code, _out, err = _cli(served, ns, *args)
        assert code == 1 and "needs MANAGE on '*'" in err, args
    assert _cli(served, ns, "revoke", "grantee", "READ", "weather.wind")[:2] == (
        0, "revoked READ on weather.wind from grantee\n")  # fmt: skip
    assert _cli(served, ns, "revoke", "grantee", "READ", "weather.wind")[:2] == (
        0, "no grant of READ on weather.wind from grantee: nothing to revoke\n")  # fmt: skip
    # the owner's token does everything, and says it as the database URL does
    owner = tokens["owner"]
    assert _cli(served, owner, "principal", "create", "made", "--service")[:2] == (0, "created service made\n")
    code, text, _ = _cli(served, owner, "token", "create", "made", "--expires-days", "1", "--json")
    made = json.loads(text)
    assert code == 0 and made["principal"] == "made" and made["token"].startswith(f"dal_{made['token_id']}_")
    assert _cli(served, made["token"], "grants")[0] == 1  # it manages nothing
    listed = _cli(served, owner, "token", "list", "made")[1]
    assert listed.startswith(f"{made['token_id']}\tmade\t") and "revoked" not in listed
    assert _cli(served, owner, "token", "revoke", made["token_id"])[:2] == (0, f"revoked token {made['token_id']}\n")
    for same in (("grants",), ("principal", "list"), ("token", "list", "made")):
        direct = CliRunner().invoke(cli, ["--catalog", served.db, *same])
        assert _cli(served, owner, *same)[:2] == (0, direct.stdout), same
    code, _out, err = _cli(served, owner, "token", "revoke", "00000000000000ff")
    direct = CliRunner().invoke(cli, ["--catalog", served.db, "token", "revoke", "00000000000000ff"])
    assert code == direct.exit_code == 1 and err == direct.stderr
