"""The authorization matrix of the routes that change the catalog (and the reads writers and lineage use): every
caller by every route by {allowed, forbidden, missing dataset}, each cell's status asserted. None allows what should
be denied; a caller without the privilege gets one answer whether or not the dataset exists (403, the same body
but for the name), a caller with it the catalog's own (404 for a missing dataset)."""

from __future__ import annotations

import json

from dal.catalog import Catalog
from dal.catalog.auth import MANAGE, READ, WRITE, AuthStore, Grant, allows
from tests.serve.conftest import ALLOWED_DS, BAD_TOKENS, FORBIDDEN_DS, MISSING_DS, PRINCIPALS, Served

DATASETS = (ALLOWED_DS, FORBIDDEN_DS, MISSING_DS)
EXISTING = {"weather.radar", "weather.wind", "sales.orders"}
CALLERS = (*PRINCIPALS, *BAD_TOKENS)
DRAFT = {"operation": "append", "schema": [{"name": "id", "type": "int64"}], "row_count": 1}
# (route, method, path, body, privilege, status when allowed on an existing dataset, ... on a missing one)
ROUTES: tuple[tuple[str, str, str, object, str, int, int], ...] = (
    ("catalog", "GET", "/api/v1/catalog", None, "", 200, 200),
    ("writable", "GET", "/api/v1/catalog/writable?dataset={d}", None, WRITE, 200, 200),
    ("manageable", "GET", "/api/v1/catalog/writable?dataset={d}&manage=1", None, MANAGE, 200, 200),
    ("create-bad-format", "POST", "/api/v1/datasets/{d}", {"format": "NO", "location": "/x"}, WRITE, 400, 400),
    ("update", "PATCH", "/api/v1/datasets/{d}", {"properties": {"matrix": "yes"}}, WRITE, 200, 404),
    ("rename-to-itself", "POST", "/api/v1/datasets/{d}/rename", {"new_name": "{d}"}, MANAGE, 200, 404),
    ("publish", "POST", "/api/v1/datasets/{d}/versions", DRAFT, WRITE, 201, 404),
    ("tag", "POST", "/api/v1/datasets/{d}/tags", {"version": "0", "tag": "matrix", "force": True}, WRITE, 200, 404),
    ("untag", "DELETE", "/api/v1/datasets/{d}/tags/matrix", None, WRITE, 200, 404),
    ("expire-none", "POST", "/api/v1/datasets/{d}/expire", {"numbers": [], "reason": "m"}, MANAGE, 200, 404),
    ("annotate-none", "POST", "/api/v1/datasets/{d}/annotate", {"numbers": [], "key": "k", "value": 1}, WRITE, 200,
     404),
    ("lineage", "POST", "/api/v1/datasets/{d}/lineage", {"number": 0, "key": "matrix", "record": {}, "inputs": []},
     WRITE, 200, 404),
    ("label", "POST", "/api/v1/datasets/{d}/labels", {"label": "matrix=yes"}, WRITE, 200, 404),
    ("unlabel", "POST", "/api/v1/datasets/{d}/labels/remove", {"label": "matrix"}, WRITE, 200, 404),
    ("partitions", "GET", "/api/v1/datasets/{d}/partitions", None, READ, 200, 404),
    ("diff", "GET", "/api/v1/datasets/{d}/diff?old_version=0&new_version=0", None, READ, 200, 404),
    ("upstream", "GET", "/api/v1/datasets/{d}/upstream?version=0", None, READ, 200, 404),
    ("downstream", "GET", "/api/v1/datasets/{d}/downstream?version=0", None, READ, 200, 404),
    ("drop", "DELETE", "/api/v1/datasets/{d}", None, MANAGE, 200, 404),  # last: the dataset is put back after it
)  # fmt: skip


def _may(who: str, privilege: str, name: str) -> bool:
    return allows([Grant(who, p, t) for p, t in PRINCIPALS[who]], privilege, name)


def _expected(who: str, route: tuple[str, str, str, object, str, int, int], d: str) -> int:
    _name, _m, _p, _b, privilege, ok, missing = route
    if who in BAD_TOKENS:
        return 401
    if privilege and not _may(who, privilege, d):
        return 404 if privilege == READ else 403  # reads: as a missing dataset; changes: one refusal
    return ok if d in EXISTING else missing


def test_every_cell_of_the_changing_routes(served: Served) -> None:
    direct = Catalog(served.db)
    kept = {d: direct.get_dataset(d) for d in EXISTING}
    cells: list[tuple[str, str, str, int, int]] = []  # (caller, route, dataset, expected, actual)
    answers: dict[tuple[str, str, str], tuple[int, bytes]] = {}
    # caller by caller (a tag then its untag), the drops last, each dropped dataset put back for the next caller
    order = [(who, d, r) for r in ROUTES[:-1] for who in CALLERS for d in DATASETS]
    order.sort(key=lambda cell: (CALLERS.index(cell[0]), DATASETS.index(cell[1])))
    order += [(who, d, ROUTES[-1]) for who in CALLERS for d in DATASETS]
    for who, d, route in order:
        name, method, path, body, _privilege, _ok, _missing = route
        data = None if body is None else json.dumps(body).replace("{d}", d).encode()
        status, raw, _ = served.request(method, path.format(d=d), who, data, {"Content-Type": "application/json"})
        answers[who, name, d] = status, raw
        cells.append((who, name, d, _expected(who, route, d), status))
        if name == "drop" and status == 200:  # its versions are gone: the next caller drops an empty one
            direct.create_dataset(d, format=kept[d].format, location=kept[d].location)
    wrong = [c for c in cells if c[3] != c[4]]
    assert wrong == [], wrong[:20]
    leaks = [c for c in cells if c[4] < 300 and c[3] >= 300]
    assert leaks == [] and not [c for c in cells if c[4] >= 500]
    assert len(cells) == len(CALLERS) * len(DATASETS) * len(ROUTES) == 10 * 3 * 19
    # without the privilege, a forbidden dataset and a missing one get one answer (but for the name asked about)
    for who in PRINCIPALS:
        for name, _m, _p, _b, privilege, _ok, _missing in ROUTES:
            if not privilege or _may(who, privilege, FORBIDDEN_DS):
                continue
            f_status, f_raw = answers[who, name, FORBIDDEN_DS]
            m_status, m_raw = answers[who, name, MISSING_DS]
            assert f_status == m_status and f_raw.replace(b"orders", b"X") == m_raw.replace(b"ordres", b"X"), name
            assert b"sales.orders" not in m_raw
    # every change and refusal is in the audit
    audit = AuthStore(served.db).audit(limit=100_000)
    assert any(r.principal == "owner" and r.action == "drop" and r.outcome == "allowed" for r in audit)
    assert any(r.principal == "writer" and r.action == "write" and r.outcome == "allowed" and r.version is not None
               for r in audit)  # fmt: skip
    assert any(r.principal == "writer" and r.action == "drop" and r.outcome == "denied" for r in audit)
    assert any(r.principal == "" and r.action == "write" and r.outcome == "denied" for r in audit)  # no token
