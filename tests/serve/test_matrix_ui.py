"""The web UI of ``dal serve`` in its authorization matrix: every caller (each principal, revoked, expired, malformed
and no token) by every UI page and JSON route by {allowed, forbidden, missing dataset}, each cell's status asserted;
none allows what should be denied; a forbidden dataset answers exactly as a missing one; no answer names a dataset
the caller may not read (lists, counts, facets, search, lineage, suggestions). Signing in and out: a form with an
anti-forgery value, an HttpOnly SameSite=Strict cookie, a POST from another origin refused."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pyarrow as pa
import pytest

import dal
from dal.catalog.auth import AuthStore
from tests.serve.conftest import ALLOWED_DS, BAD_TOKENS, FORBIDDEN_DS, MISSING_DS, PRINCIPALS, Served, http
from tests.serve.test_matrix import EXISTING, _may_read

DATASETS = (ALLOWED_DS, FORBIDDEN_DS, MISSING_DS)
CALLERS = (*PRINCIPALS, *BAD_TOKENS)
# (name, path template, JSON or a page): every route of the UI that names a dataset
DATASET_ROUTES = (
    ("page", "/d/{d}", False),
    ("page-version", "/d/{d}?v=0&depth=3&vpage=1", False),
    ("page-stats", "/d/{d}?stats=1&check=1", False),
    ("page-diff", "/d/{d}/diff?old=0&new=0", False),
    ("page-preview", "/d/{d}/preview?v=0&rows=2", False),
    ("show", "/api/datasets/{d}", True),
    ("versions", "/api/datasets/{d}/versions?check=1", True),
    ("schema", "/api/datasets/{d}/schema?version=0", True),
    ("diff", "/api/datasets/{d}/diff?old=0&new=0", True),
    ("partitions", "/api/datasets/{d}/partitions", True),
    ("tags", "/api/datasets/{d}/tags", True),
    ("preview", "/api/datasets/{d}/preview?rows=2", True),
    ("lineage", "/api/datasets/{d}/versions/0/lineage?depth=5", True),
)
# routes that name no dataset: (name, path, JSON or a page)
OTHER_ROUTES = (
    ("index", "/", False),
    ("search", "/?q=a", False),
    ("search-glob", "/?q=*.*&sort=-rows", False),
    ("facet", "/?format=delta", False),
    ("datasets", "/api/datasets", True),
    ("datasets-search", "/api/datasets?q=orders", True),
    ("datasets-tag", "/api/datasets?tag=prod&per_page=1", True),
    ("api", "/api", True),
    ("openapi", "/api/openapi.json", True),
)
NAMES = (*EXISTING, "weather.mix", "sales.report")


@pytest.fixture(scope="module")
def built(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """weather.mix v0 built from weather.radar v0 and sales.orders v0; sales.report v0 from weather.radar v0."""
    root = tmp_path_factory.mktemp("lineage")
    for name, inputs in (
        ("weather.mix", [("weather.radar", 0), ("sales.orders", 0)]),
        ("sales.report", [("weather.radar", 0)]),
    ):
        dal.write(pa.table({"id": [1]}), name, path=str(root / name), catalog=served.db, inputs=inputs)
    return served


def get(served: Served, path: str, who: str, json_route: bool) -> tuple[int, bytes, dict[str, str]]:
    """A page with the caller's session cookie, the JSON with its bearer token (the UI takes both)."""
    token = served.tokens.get(who)
    if json_route:
        return http("GET", served.url + path, token)
    return http("GET", served.url + path, None, headers={"Cookie": f"dal_session={token}"} if token else {})


def same(raw: bytes, name: str) -> str:
    """An answer with the dataset's name and the sign-out form's anti-forgery value (new on each page) blanked."""
    return re.sub(r'name="csrf" value="[^"]*"', "CSRF", raw.decode().replace(name, "X"))


def _hidden_names(who: str) -> set[str]:
    return {n for n in NAMES if who in BAD_TOKENS or not _may_read(who, n)}


def test_every_cell(built: Served) -> None:
    cells: list[tuple[str, str, str, int, int]] = []  # (caller, route, dataset, expected, actual)
    answers: dict[tuple[str, str, str], tuple[int, bytes]] = {}
    leaks: list[tuple[str, str, str]] = []
    for who, d, (route, path, json_route) in itertools.product(CALLERS, DATASETS, DATASET_ROUTES):
        status, raw, headers = get(built, path.format(d=d), who, json_route)
        answers[who, route, d] = status, raw
        if who in BAD_TOKENS:
            expected = 401
        else:
            expected = 200 if _may_read(who, d) and d in EXISTING else 404
        cells.append((who, route, d, expected, status))
        assert headers.get("content-security-policy", "").startswith("default-src 'none'"), (who, route)
        assert headers.get("referrer-policy") == "same-origin" and headers.get("cache-control") == "no-store"
        text = raw.decode()
        leaks += [(who, route, n) for n in _hidden_names(who) - {d} if n in text]
        assert built.db.split("///")[1] not in text  # nor the catalog database's address
    for who, (route, path, json_route) in itertools.product(CALLERS, OTHER_ROUTES):
        status, raw, _ = get(built, path, who, json_route)
        cells.append((who, route, "-", 401 if who in BAD_TOKENS else 200, status))
        text = raw.decode()
        leaks += [(who, route, n) for n in _hidden_names(who) if n in text]
    wrong = [c for c in cells if c[3] != c[4]]
    assert not wrong, wrong[:20]
    assert not [c for c in cells if c[4] < 400 <= c[3]]  # 0 allowed that should be denied
    assert not leaks, leaks[:20]
    assert len(cells) == len(CALLERS) * (len(DATASETS) * len(DATASET_ROUTES) + len(OTHER_ROUTES))
    # a forbidden dataset answers exactly like a missing one: same status, same body but for the name
    for who, (route, _, _) in itertools.product(PRINCIPALS, DATASET_ROUTES):
        if _may_read(who, FORBIDDEN_DS):
            continue
        status_f, raw_f = answers[who, route, FORBIDDEN_DS]
        status_m, raw_m = answers[who, route, MISSING_DS]
        assert status_f == status_m == 404, (who, route)
        assert same(raw_f, FORBIDDEN_DS) == same(raw_m, MISSING_DS), (who, route)
    for who in BAD_TOKENS:  # without a valid token: the sign-in page, the same whatever was asked
        status, raw = answers[who, "page", ALLOWED_DS]
        assert status == 401 and b'id="signin-form"' in raw and b"weather.radar" in raw  # (where to go next)
        token = built.tokens[who]
        assert token is None or token.encode() not in raw


def listing(served: Served, who: str, query: str = "") -> Any:
    status, raw, _ = http("GET", served.url + "/api/datasets" + query, served.tokens[who])
    assert status == 200
    return json.loads(raw)


@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_lists_counts_and_facets_hold_only_what_the_principal_may_read(built: Served, who: str) -> None:
    readable = sorted(n for n in NAMES if _may_read(who, n))
    found = listing(built, who)
    assert [d["name"] for d in found["datasets"]] == readable
    assert found["total"] == len(readable)
    facets = found["facets"]
    assert sum(facets["format"].values()) == len(readable)
    assert facets["tag"] == ({"prod": 1} if _may_read(who, "weather.radar") else {})
    # a page of one: the count and the pages are of the readable datasets too
    one = listing(built, who, "?per_page=1&page=2")
    assert one["total"] == len(readable) and one["pages"] == max(1, len(readable))
    assert [d["name"] for d in one["datasets"]] == readable[1:2]
    searched = listing(built, who, "?q=sales.*")
    assert [d["name"] for d in searched["datasets"]] == [n for n in readable if n.startswith("sales.")]


def test_suggestions_and_lineage_only_among_readable_names(built: Served) -> None:
    status, raw, _ = http("GET", built.url + "/api/datasets/weather.rdar", built.tokens["ns_reader"])
    assert status == 404 and "did you mean 'weather.radar'" in json.loads(raw)["error"]
    status, raw, _ = http("GET", built.url + "/api/datasets/sales.ordrs", built.tokens["ns_reader"])
    assert status == 404 and "did you mean" not in json.loads(raw)["error"]  # sales.orders: not its to hear of
    status, raw, _ = http("GET", built.url + "/api/datasets/sales.ordrs", built.tokens["owner"])
    assert "did you mean 'sales.orders'" in json.loads(raw)["error"]
    # lineage: the owner sees both inputs and both outputs, the namespace reader only weather's
    for who, inputs, outputs in (
        ("owner", {"weather.radar", "sales.orders"}, {"weather.mix", "sales.report"}),
        ("ns_reader", {"weather.radar"}, {"weather.mix"}),
    ):
        status, raw, _ = http("GET", built.url + "/api/datasets/weather.mix/versions/0/lineage", built.tokens[who])
        assert status == 200 and {u["dataset"] for u in json.loads(raw)["upstream"]} == inputs
        status, raw, _ = http("GET", built.url + "/api/datasets/weather.radar/versions/0/lineage", built.tokens[who])
        assert outputs <= {u["dataset"] for u in json.loads(raw)["downstream"]}
        status, raw, _ = http("GET", built.url + "/api/datasets/weather.mix/versions", built.tokens[who])
        assert {u["dataset"] for u in json.loads(raw)[0]["properties"]["lineage"]["upstream"]} == inputs
        cookie = {"Cookie": f"dal_session={built.tokens[who]}"}
        status, raw, _ = http("GET", built.url + "/d/weather.mix?depth=5", headers=cookie)
        assert status == 200 and all(n.encode() in raw for n in inputs)
        status, raw, _ = http("GET", built.url + "/d/weather.radar?v=0&depth=5", headers=cookie)
        assert status == 200 and all(n.encode() in raw for n in outputs)
    for path in ("/d/weather.mix?depth=5", "/d/weather.radar?v=0&depth=5", "/api/datasets/weather.mix"):
        status, raw, _ = get(built, path, "ns_reader", path.startswith("/api"))
        assert status == 200 and b"sales." not in raw, path


# -- signing in and out ---------------------------------------------------------------------------------------


def signin_form(served: Served) -> tuple[str, str]:
    """The sign-in page's anti-forgery value and the cookie that goes with it."""
    import urllib.request

    with urllib.request.urlopen(served.url + "/signin", timeout=30) as r:
        page = r.read().decode()
        set_cookie = r.headers.get_all("set-cookie") or []
    field = re.search(r'name="csrf" value="([^"]+)"', page)
    assert field is not None
    cookie = next(c for c in set_cookie if c.startswith("dal_csrf="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie  # plain HTTP: loopback
    return field.group(1), cookie.split(";")[0].split("=", 1)[1]


def post(
    served: Served, path: str, fields: dict[str, str], headers: dict[str, str]
) -> tuple[int, bytes, list[str], str]:
    import urllib.error
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    body = urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(served.url + path, data=body, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", **headers})  # fmt: skip
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.read(), r.headers.get_all("set-cookie") or [], r.headers.get("location", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get_all("set-cookie") or [], e.headers.get("location", "")


def test_sign_in_and_out(built: Served) -> None:
    token = str(built.tokens["one_reader"])
    csrf, cookie = signin_form(built)
    same_origin = {"Origin": built.url, "Cookie": f"dal_csrf={cookie}"}
    # another origin: refused before anything is looked at
    status, raw, set_cookie, _ = post(built, "/signin", {"token": token, "csrf": csrf},
                                      {**same_origin, "Origin": "http://evil.example"})  # fmt: skip
    assert status == 403 and not set_cookie and b"another origin" in raw
    # no Origin but no matching anti-forgery value (a forged form): refused
    for fields, headers in (
        ({"token": token, "csrf": "forged"}, {"Cookie": f"dal_csrf={cookie}"}),
        ({"token": token, "csrf": csrf}, {}),
        ({"token": token}, {"Cookie": f"dal_csrf={cookie}"}),
    ):
        status, raw, set_cookie, _ = post(built, "/signin", fields, headers)
        assert status == 403 and b"sign in again" in raw
        assert not [c for c in set_cookie if c.startswith("dal_session=")]
    # a token that is not valid: the sign-in page again (401), the token never echoed
    for bad in ("revoked", "expired", "malformed"):
        status, raw, set_cookie, _ = post(built, "/signin", {"token": str(built.tokens[bad]), "csrf": csrf},
                                          same_origin)  # fmt: skip
        assert status == 401 and b'id="signin-error"' in raw and str(built.tokens[bad]).encode() not in raw
        assert not [c for c in set_cookie if c.startswith("dal_session=")]
    # the right token: a cookie no script reads, sent to this site only; where to go next: a local path only
    status, raw, set_cookie, location = post(
        built, "/signin", {"token": token, "csrf": csrf, "next": "//evil.example/x"}, same_origin
    )
    assert status == 303 and location == "/" and token not in location
    session = next(c for c in set_cookie if c.startswith("dal_session="))
    assert "HttpOnly" in session and "SameSite=strict" in session
    signed_in = {"Cookie": f"dal_session={token}; dal_csrf={cookie}"}
    status, raw, _ = http("GET", built.url + "/", headers=signed_in)
    page = raw.decode()
    assert status == 200 and "signed in as one_reader" in page and token not in page
    assert re.findall(r'class="dataset-link" href="([^"]+)"', page) == ["/d/weather.radar"]
    _, _, _, location = post(built, "/signin", {"token": token, "csrf": csrf, "next": "/d/weather.radar?v=0"},
                             same_origin)  # fmt: skip
    assert location == "/d/weather.radar?v=0"
    # signing out: a POST with the page's anti-forgery value clears both cookies
    page_csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert page_csrf is not None and page_csrf.group(1) == cookie
    status, _, set_cookie, _ = post(built, "/signout", {"csrf": "forged"}, signed_in)
    assert status == 403 and not [c for c in set_cookie if c.startswith("dal_session=")]
    status, _, set_cookie, location = post(built, "/signout", {"csrf": cookie}, signed_in)
    assert status == 303 and location == "/signin"
    assert any(c.startswith('dal_session=""') and "Max-Age=0" in c for c in set_cookie)
    # the sign-ins were audited, the token nowhere in it
    store = AuthStore(built.db)
    try:
        rows = [r for r in store.audit(limit=1000) if r.action == "ui sign-in"]
    finally:
        store.close()
    assert {r.outcome for r in rows} == {"allowed", "denied"} and all(token not in str(r.to_dict()) for r in rows)


def test_a_revoked_session_is_signed_out_at_once(built: Served) -> None:
    store = AuthStore(built.db)
    try:
        token, info = store.create_token("ns_reader")
        cookie = {"Cookie": f"dal_session={token}"}
        assert http("GET", built.url + "/d/weather.wind", headers=cookie)[0] == 200
        store.revoke_token(info.token_id)
    finally:
        store.close()
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(built.url + "/d/weather.wind", headers=cookie), timeout=30)
        raise AssertionError("a revoked token's session was answered")
    except urllib.error.HTTPError as e:
        status, raw, set_cookie = e.code, e.read(), e.headers.get_all("set-cookie") or []
    assert status == 401 and b'id="signin-form"' in raw and b"weather.wind" in raw
    assert any(c.startswith('dal_session=""') for c in set_cookie)  # the browser forgets it
    assert http("GET", built.url + "/api/datasets", token)[0] == 401


def test_the_cookies_are_secure_over_tls(built: Served) -> None:
    from starlette.testclient import TestClient

    from dal.serve.app import create_app

    client = TestClient(create_app(built.db), base_url="https://127.0.0.1")
    page = client.get("/signin")
    assert "Secure" in page.headers["set-cookie"]
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    answer = client.post("/signin", data={"token": built.tokens["owner"], "csrf": csrf.group(1)},
                         follow_redirects=False)  # fmt: skip
    assert answer.status_code == 303
    assert all("Secure" in c and "HttpOnly" in c for c in answer.headers.get_list("set-cookie"))
