"""The authorization matrix of ``dal serve``: every caller by every route by {allowed, forbidden, missing dataset},
each cell's status asserted; none allows what should be denied; a forbidden dataset answers as a missing one."""

from __future__ import annotations

import itertools
import json
import urllib.parse
from datetime import UTC, datetime

from dal.catalog.auth import MANAGE, READ, Grant, allows, manages
from tests.serve.conftest import ALLOWED_DS, BAD_TOKENS, FORBIDDEN_DS, MISSING_DS, PRINCIPALS, Served

DATASETS = (ALLOWED_DS, FORBIDDEN_DS, MISSING_DS)
EXISTING = {"weather.radar", "weather.wind", "sales.orders"}
# dataset routes: (name, method, path template, whether it needs the tag 'prod', which only weather.radar has)
DATASET_ROUTES = (
    ("show", "/api/v1/datasets/{d}", False),
    ("versions", "/api/v1/datasets/{d}/versions", False),
    ("versions-limit", "/api/v1/datasets/{d}/versions?limit=1", False),
    ("tags", "/api/v1/datasets/{d}/tags", False),
    ("pin", "/api/v1/datasets/{d}/pin", False),
    ("pin-number", "/api/v1/datasets/{d}/pin?version=0", False),
    ("pin-tag", "/api/v1/datasets/{d}/pin?version=prod", True),
    ("pin-time", "/api/v1/datasets/{d}/pin?version={now}&time=1", False),
)
# admin routes: (name, method, path, body, owner's status, what the caller must manage: '*' for the principal and
# token routes, '' for anything (the grants it lists are those within), else the target the route names)
ADMIN_ROUTES = (
    ("principals", "GET", "/api/v1/admin/principals", None, 200, "*"),
    ("grants", "GET", "/api/v1/admin/grants?principal=nobody", None, 200, ""),
    ("audit", "GET", "/api/v1/admin/audit?dataset={d}&limit=5", None, 200, "{d}"),
    ("create-principal", "POST", "/api/v1/admin/principals", {"name": "p{i}"}, 201, "*"),
    ("create-token", "POST", "/api/v1/admin/tokens", {"principal": "nobody", "expires_days": 1}, 201, "*"),
    ("list-tokens", "GET", "/api/v1/admin/tokens?principal=nobody", None, 200, "*"),
    ("revoke-token", "DELETE", "/api/v1/admin/tokens/00000000000000ff", None, 404, "*"),
    (
        "grant",
        "POST",
        "/api/v1/admin/grants",
        {"principal": "writer", "privilege": "WRITE", "target": "weather.*"},
        200,
        "weather.*",
    ),
    (
        "revoke",
        "POST",
        "/api/v1/admin/grants/revoke",
        {"principal": "nobody", "privilege": "READ", "target": "{d}"},
        200,
        "{d}",
    ),
)
CALLERS = (*PRINCIPALS, *BAD_TOKENS)


def _may_read(who: str, name: str) -> bool:
    return allows([Grant(who, p, t) for p, t in PRINCIPALS[who]], READ, name)


def _expected_dataset(who: str, name: str, needs_tag: bool) -> int:
    if who in BAD_TOKENS:
        return 401
    if not _may_read(who, name) or name not in EXISTING:
        return 404
    return 404 if needs_tag and name != "weather.radar" else 200


def test_every_cell(served: Served) -> None:
    from dal.catalog import Catalog

    direct = Catalog(served.db)
    for d in EXISTING:  # one label on every dataset: who hears of it through /labelled and the facets
        direct.label(d, "matrix-all")
    cells: list[tuple[str, str, str, int, int]] = []  # (caller, route, dataset, expected, actual)
    answers: dict[tuple[str, str, str], tuple[int, bytes, dict[str, str]]] = {}
    counter = itertools.count()
    now = urllib.parse.quote(datetime.now(UTC).isoformat())  # after the writes, before any later one
    for who, d in itertools.product(CALLERS, DATASETS):
        for route, path, needs_tag in DATASET_ROUTES:
            answer = served.request("GET", path.format(d=d, now=now), who)
            answers[who, route, d] = answer
            cells.append((who, route, d, _expected_dataset(who, d, needs_tag), answer[0]))
        status, raw, _ = served.request("GET", "/api/v1/datasets", who)
        listed = {x["name"] for x in json.loads(raw)["datasets"]} if status == 200 else set()
        # a list "allows" a dataset when it names it
        cells.append((who, "list", d, 401 if who in BAD_TOKENS else 200, status))
        shown = d in listed
        should = who not in BAD_TOKENS and d in EXISTING and _may_read(who, d)
        cells.append((who, "list-names", d, 200 if should else 404, 200 if shown else 404))
        # datasets with a label, and a search's count and facets: only what the caller may read is named or counted
        status, raw, _ = served.request("GET", "/api/v1/labelled?label=matrix-all", who)
        cells.append((who, "labelled", d, 401 if who in BAD_TOKENS else 200, status))
        shown = status == 200 and d in json.loads(raw)["datasets"]
        cells.append((who, "labelled-names", d, 200 if should else 404, 200 if shown else 404))
        query = urllib.parse.urlencode({"q": d, "f.label": "matrix-all"})  # each name matches itself only
        status, raw, _ = served.request("GET", f"/api/v1/search/facets?{query}", who)
        cells.append((who, "facets", d, 401 if who in BAD_TOKENS else 200, status))
        counted = status == 200 and json.loads(raw)["count"] == 1 == json.loads(raw)["facets"]["label"]["matrix-all"]
        cells.append((who, "facets-count", d, 200 if should else 404, 200 if counted else 404))
        for route, method, path, body, owner_status, needs in ADMIN_ROUTES:
            data = None
            if body is not None:
                filled = {k: v.format(d=d, i=next(counter)) if isinstance(v, str) else v for k, v in body.items()}
                data = json.dumps(filled).encode()
            status, raw, _ = served.request(method, path.format(d=d), who, data, {"Content-Type": "application/json"})
            mine = [Grant(who, p, t) for p, t in PRINCIPALS.get(who, [])]
            if needs == "":
                may = any(g.privilege == MANAGE for g in mine)
            else:
                may = manages(mine, needs.format(d=d))
            expected = 401 if who in BAD_TOKENS else owner_status if may else 403
            cells.append((who, route, d, expected, status))
    wrong = [c for c in cells if c[3] != c[4]]
    assert wrong == [], wrong[:20]
    # 0 cells allow what should be denied, and nothing is a server error
    leaks = [c for c in cells if c[4] < 300 and c[3] >= 300]
    assert leaks == [] and not [c for c in cells if c[4] >= 500]
    routes = len(DATASET_ROUTES) + 6 + len(ADMIN_ROUTES)
    assert len(cells) == len(CALLERS) * len(DATASETS) * routes == 10 * 3 * 23
    # a forbidden dataset answers exactly as a missing one (but for the name asked about)
    for who in PRINCIPALS:
        if _may_read(who, FORBIDDEN_DS):
            continue
        for route, _path, _ in DATASET_ROUTES:
            f_status, f_raw, f_headers = answers[who, route, FORBIDDEN_DS]
            m_status, m_raw, m_headers = answers[who, route, MISSING_DS]
            assert f_status == m_status == 404
            assert f_raw.replace(FORBIDDEN_DS.encode(), b"X") == m_raw.replace(MISSING_DS.encode(), b"X")
            skip = {"date", "content-length"}
            assert {k.lower(): v for k, v in f_headers.items() if k.lower() not in skip} == {
                k.lower(): v for k, v in m_headers.items() if k.lower() not in skip
            }
            # close names come only from what the caller may read: never the forbidden sibling
            assert b"sales.orders" not in m_raw


def test_unauthenticated_answers_are_one_and_ask_for_a_bearer_token(served: Served) -> None:
    answers = {who: served.request("GET", f"/api/v1/datasets/{ALLOWED_DS}", who) for who in BAD_TOKENS}
    assert {a[0] for a in answers.values()} == {401}
    assert len({a[1] for a in answers.values()}) == 1  # revoked, expired, none, malformed: one answer
    assert all(a[2].get("www-authenticate", a[2].get("WWW-Authenticate")) == "Bearer" for a in answers.values())


def test_health_needs_no_token(served: Served) -> None:
    assert served.request("GET", "/api/v1/health")[:2] == (200, b'{"ok":true,"api":"v1"}')


def test_the_browsing_commands_cell_by_cell(served: Served) -> None:
    """The same matrix for the CLI through the server: dal ls / show / versions, every caller, every dataset."""
    from click.testing import CliRunner

    from dal.cli.app import cli

    cells: list[tuple[str, str, str, str, str]] = []  # (caller, command, dataset, expected, actual)
    for who in CALLERS:
        token = served.tokens[who]
        env = {"DAL_CATALOG_URL": served.url, "DAL_TOKEN": token or ""}
        listed = CliRunner().invoke(cli, ["ls", "--json"], env=env)
        for d in DATASETS:
            if who in BAD_TOKENS:
                expected_ls = "unauthorized"
            else:
                expected_ls = "listed" if d in EXISTING and _may_read(who, d) else "absent"
            if listed.exit_code == 0:
                actual_ls = "listed" if d in {x["name"] for x in json.loads(listed.stdout)} else "absent"
            else:
                actual_ls = "unauthorized" if "valid bearer token" in listed.stderr else listed.stderr
            cells.append((who, "ls", d, expected_ls, actual_ls))
            for command in ("show", "versions"):
                result = CliRunner().invoke(cli, [command, d, "--json"], env=env)
                if who in BAD_TOKENS:
                    expected = "unauthorized"
                else:
                    expected = "shown" if d in EXISTING and _may_read(who, d) else f"dataset {d!r} not found"
                    if d == MISSING_DS and _may_read(who, FORBIDDEN_DS):  # only who may read it hears of it
                        expected += f"; did you mean {FORBIDDEN_DS!r}?"
                if result.exit_code == 0:
                    actual = "shown"
                elif "valid bearer token" in result.stderr:
                    actual = "unauthorized"
                else:
                    actual = json.loads(result.stderr)["error"]
                cells.append((who, command, d, expected, actual))
    wrong = [c for c in cells if c[3] != c[4]]
    assert wrong == [] and len(cells) == len(CALLERS) * len(DATASETS) * 3 == 90, wrong[:10]
    assert not [c for c in cells if c[4] in ("shown", "listed") and c[3] not in ("shown", "listed")]
