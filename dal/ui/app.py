"""The ``dal ui`` web app: catalog pages and a JSON API, read-only, over one ``Catalog``.

Pages are server-rendered Jinja templates (autoescaped) with inline SVG charts: no JavaScript, no CDN.
A strict Content-Security-Policy forbids scripts altogether, so an escaping slip could not run one either.
Only GET and HEAD are served (anything else is 405), and with a token every request must carry it.

Why one module: the routes and their view functions (markup lives in the templates); each route is short, and
the security rules (GET/HEAD only, token, CSP, redirects) apply to all of them here.
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from dal import lineage
from dal.catalog import Catalog, VersionInfo
from dal.catalog.errors import CatalogUnavailable, DalError, NotFound
from dal.catalog.urls import mask_text, mask_url
from dal.errors import is_foreign, one_line, translate
from dal.ops import views
from dal.progress import size_text
from dal.ui.charts import Bar, Node, bar_chart, hbar_chart, lineage_graph
from dal.ui.preview import preview

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PER_PAGE = 50
MAX_PER_PAGE = 200
MAX_PARTITION_BARS = 60
MAX_HISTORY = 500  # versions on a dataset's page (charts, pickers); all of them: /api/datasets/NAME/versions
VERSIONS_PER_PAGE = 25  # rows of the versions table beside the charts (?vpage=)
MAX_DEPTH = 20  # lineage hops, as the API allows
DEFAULT_TREE_DEPTH = 3  # hops of the lineage trees on a dataset's page (?depth=)
MAX_TREE_NODES = 300  # versions one lineage tree lists at most (the rest: the JSON, with ?depth=)
# characters of a path segment or a version parameter: names have at most 200 (catalog.types), versions (numbers,
# tags, times) fewer; a longer one is refused before any lookup (error messages would repeat all of it)
MAX_SEGMENT = 1000
FACETS = ("format", "owner", "tag", "column")
SORTS = {
    "name": "name",
    "-updated": "recently updated",
    "-rows": "most rows",
    "-size": "largest",
    "updated": "least recently updated",
    "-name": "name, Z to A",
}
COOKIE = "dal_ui_token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
_log = logging.getLogger("dal.ui")


class _Guard:
    """Pure ASGI middleware: GET/HEAD only (405 otherwise), the token when one is set, security headers."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message["headers"] = headers
            await send(message)

        if scope["method"] not in ("GET", "HEAD"):
            response: Response = PlainTextResponse("dal ui is read-only: only GET and HEAD", 405)
            response.headers["allow"] = "GET, HEAD"
            await response(scope, receive, send_with_headers)
            return
        if self.token is not None:
            request = Request(scope)
            given = _bearer(request.headers.get("authorization", ""))
            from_query = request.query_params.get("token")
            if given is None:
                given = from_query or request.cookies.get(COOKIE)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                response = PlainTextResponse(
                    "a token is needed: send 'Authorization: Bearer TOKEN' or open the page once with ?token=TOKEN",
                    401,
                )
                response.headers["www-authenticate"] = "Bearer"
                await response(scope, receive, send_with_headers)
                return
            if from_query is not None:
                # keep the token out of the address bar, history and links: a cookie from now on
                rest = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
                # one leading slash: '//evil.com/' or '/\\evil.com/' as a Location is another site to a browser
                path = "/" + request.url.path.lstrip("/\\")
                response = RedirectResponse(path + (f"?{urlencode(rest)}" if rest else ""), 303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise _BadRequest(f"{name} must be a whole number in [{lo}, {hi}], not {raw[:40]!r}")
    return max(lo, min(int(raw), hi))


def _version_param(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if raw and len(raw) > MAX_SEGMENT:
        raise _BadRequest(f"{name} must be a version number, tag or time of at most {MAX_SEGMENT} characters")
    return raw if raw else None


class _BadRequest(DalError):
    """A malformed query parameter (400)."""


class _NoPage(DalError):
    """A path with a segment no dataset or version has (404)."""


def _check_path(request: Request) -> None:
    """Refuse (404) a path segment longer than ``MAX_SEGMENT``: no dataset or version is named that long."""
    if any(len(str(v)) > MAX_SEGMENT for v in request.path_params.values()):
        raise _NoPage(f"no such page: a path segment is longer than {MAX_SEGMENT} characters (no name or version is)")


def _status(e: DalError) -> int:
    if isinstance(e, NotFound | _NoPage):
        return 404
    if isinstance(e, CatalogUnavailable):
        return 503
    return 400


def _message(e: BaseException) -> str:
    return mask_text(one_line(e))


def _human_int(n: object) -> str:
    return "-" if n is None else f"{n:,}"


def _human_size(n: object) -> str:
    return "-" if n is None else size_text(int(n))  # type: ignore[call-overload]


def _lineage(cat: Catalog, name: str, version: str | int | VersionInfo | None, depth: int) -> dict[str, Any]:
    """What ``dal lineage NAME V --json`` prints (the same builder), with the program path and Spark master masked
    once more: a record written by another tool (or an older dal) must not show a credential here either."""
    out = lineage.lineage(cat, name, version, depth=depth)
    if out.get("program"):
        out["program"] = mask_url(out["program"])
    spark = out.get("spark")
    if isinstance(spark, dict) and spark.get("master"):
        out["spark"] = {**spark, "master": mask_url(spark["master"])}
    return out


def _pick(history: list[VersionInfo], asked: str | None) -> VersionInfo | None:
    """The version ``?v=`` names when it is the latest or a number among ``history`` (no query needed)."""
    if asked in (None, "latest"):
        return history[-1]
    if asked is not None and asked.isascii() and asked.isdigit():
        first = history[0].number
        i = int(asked) - first
        return history[i] if 0 <= i < len(history) and history[i].number == int(asked) else None
    return None


def _tags(history: list[VersionInfo]) -> dict[str, int]:
    """Every tag and the version it names, from a complete history (as ``Catalog.tags``: sorted by tag)."""
    return dict(sorted((t, v.number) for v in history for t in v.tags))


def _version_link(dataset: object, version: object) -> str:
    return f"/d/{quote(str(dataset), safe='')}?v={quote(str(version), safe='')}"


def _how(edge: dict[str, Any]) -> str:
    """How an edge is known, as the graph labels it: ``declared`` only when the record says so."""
    return "declared" if edge.get("how") == "declared" else "inferred"


def _downstream_items(nodes: list[Any]) -> list[dict[str, Any]]:
    """The API's downstream tree as the template's nested list: label, link, how, children."""
    items: list[dict[str, Any]] = []
    for d in nodes:
        if not isinstance(d, dict):
            continue
        if d.get("truncated"):
            items.append({"more": f"only the first {d.get('shown')} are listed"})
            continue
        items.append({
            "label": f"{d['dataset']} @ {d['version']}",
            "href": _version_link(d["dataset"], d["version"]),
            "how": _how(d),
            "children": _downstream_items(d.get("downstream") or []),
        })  # fmt: skip
    return items


def _upstream_items(cat: Catalog, name: str, number: int, depth: int) -> tuple[list[dict[str, Any]], bool]:
    """What built ``name`` @ ``number``, and what built that, ``depth`` hops up (each version once; at most
    MAX_TREE_NODES, then cut: the second value says so), from the catalog's lineage edges."""
    seen: set[tuple[str, int]] = {(name, number)}
    cut = [False]

    def walk(ds: str, v: int, hops: int) -> list[dict[str, Any]]:
        items = []
        for e in cat.upstream(ds, v):
            key = (e.upstream, e.upstream_version)
            if key in seen:
                continue
            if len(seen) > MAX_TREE_NODES:
                cut[0] = True
                break
            seen.add(key)
            items.append({
                "label": f"{e.upstream} @ {e.upstream_version}" + (f" where {e.filters}" if e.filters else ""),
                "href": _version_link(e.upstream, e.upstream_version),
                "how": "declared" if e.how == "declared" else "inferred",
                "children": walk(e.upstream, e.upstream_version, hops - 1) if hops > 1 else [],
            })  # fmt: skip
        return items

    return walk(name, number, depth), cut[0]


def _count_items(items: list[dict[str, Any]]) -> int:
    return sum(1 + _count_items(i.get("children") or []) for i in items if "label" in i)


def _lineage_view(out: dict[str, Any]) -> dict[str, Any]:
    """The dataset page's lineage section: producer facts and the graph (None when there is nothing to draw)."""
    upstream, downstream = _upstream_nodes(out), _downstream_nodes(out)
    this = Node(f"{out['dataset']} @ {out['version']}", f"{out['dataset']} @ version {out['version']}")
    graph = (
        Markup(lineage_graph(upstream, this, downstream, element_id="lineage-graph"))
        if upstream or downstream
        else None
    )
    return {**_producer(out), "graph": graph}


def _upstream_nodes(out: dict[str, Any]) -> list[Node]:
    """One node per upstream version (its filters, all of them, in the tooltip)."""
    upstream: list[Node] = []
    seen: set[tuple[str, str]] = set()
    for u in out.get("upstream") or []:
        if not isinstance(u, dict):
            continue
        key = (str(u.get("dataset")), str(u.get("version")))
        if key in seen:
            continue
        seen.add(key)
        filters = [str(x.get("filters")) for x in out["upstream"] if isinstance(x, dict) and x.get("filters")
                   and (str(x.get("dataset")), str(x.get("version"))) == key]  # fmt: skip
        tip = f"{key[0]} @ version {key[1]}" + (" where " + " | ".join(filters) if filters else "")
        upstream.append(Node(f"{key[0]} @ {key[1]}", tip, _version_link(*key), _how(u)))
    return upstream


def _downstream_nodes(out: dict[str, Any]) -> list[Node]:
    return [
        Node(f"{d['dataset']} @ {d['version']}", f"{d['dataset']} @ version {d['version']}",
             _version_link(d["dataset"], d["version"]), _how(d))
        for d in out.get("downstream") or []
        if isinstance(d, dict) and not d.get("truncated")
    ]  # fmt: skip


def _producer(out: dict[str, Any]) -> dict[str, Any]:
    """Who wrote the version, when, with what (git commit, Spark application), as the page shows it."""
    git = out.get("git") if isinstance(out.get("git"), dict) else None
    spark = out.get("spark") if isinstance(out.get("spark"), dict) else None
    commit = str(git.get("commit") or "") if git else ""
    return {
        "recorded": bool(out.get("time")),
        "user": out.get("user"),
        "host": out.get("host"),
        "time": str(out["time"])[:19].replace("T", " ") if out.get("time") else None,
        "dal_version": out.get("dal_version"),
        "program": out.get("program"),
        "git": (commit[:10] + (" (dirty)" if git and git.get("dirty") else "")) if commit else None,
        "git_commit": commit or None,
        "spark_app": spark.get("application_id") if spark else None,
        "spark_master": spark.get("master") if spark else None,
    }


API_SUMMARIES = {
    "/api": "this index",
    "/api/openapi.json": "the OpenAPI 3.1 document of this API",
    "/api/datasets": "datasets, paged (?page, ?per_page), searched (?q) and narrowed by facets (?format, ?owner, ?tag, "
    "?column), sorted (?sort), with each latest version's row count and size and the facets' counts",
    "/api/datasets/{name}": "a dataset and its newest version with its schema (dal show --json)",
    "/api/datasets/{name}/versions": "its versions, oldest first (?limit: the newest N; ?check=1: whether their files "
    "are in storage; dal versions --json)",
    "/api/datasets/{name}/schema": "the schema of one version (?version; dal schema --json)",
    "/api/datasets/{name}/diff": "the schema change between two versions (?old, ?new; dal diff --json)",
    "/api/datasets/{name}/partitions": "the partitions of one version (?version; dal partitions --json)",
    "/api/datasets/{name}/tags": "its tags and the versions they name",
    "/api/datasets/{name}/preview": "the first rows of one version (?version, ?rows), tensors summarised",
    "/api/datasets/{name}/versions/{v}/lineage": "what built version v and what was built from it (?depth up to 20)",
}


def openapi_document() -> dict[str, Any]:
    """The API as an OpenAPI 3.1 document (every endpoint is a GET answering JSON; errors are ``{"error": …}``)."""
    from dal._version import __version__

    def param(name: str, where: str, kind: str, description: str, **schema: Any) -> dict[str, Any]:
        return {"name": name, "in": where, "required": where == "path", "description": description,
                "schema": {"type": kind, **schema}}  # fmt: skip

    version = param("version", "query", "string", "a version number, tag or ISO timestamp (default: the latest)")
    query_params: dict[str, list[dict[str, Any]]] = {
        "/api/datasets": [
            param("q", "query", "string", "a glob on the name, or a substring of name, description, owner, format, "
                  "a tag or a column"),
            *[param(f, "query", "string", f"only datasets with this {f} (exact)") for f in FACETS],
            param("sort", "query", "string", "the order", enum=list(SORTS)),
            param("page", "query", "integer", "the page (from 1)", minimum=1),
            param("per_page", "query", "integer", "datasets per page", minimum=1, maximum=MAX_PER_PAGE),
        ],
        "/api/datasets/{name}/versions": [
            param("limit", "query", "integer", "the newest N only", minimum=0),
            param("check", "query", "integer", "1: look in storage whether each version's files are there", enum=[0, 1]),
        ],
        "/api/datasets/{name}/schema": [version],
        "/api/datasets/{name}/partitions": [version],
        "/api/datasets/{name}/diff": [
            param("old", "query", "string", "the older version"), param("new", "query", "string", "the newer one")
        ],
        "/api/datasets/{name}/preview": [version, param("rows", "query", "integer", "rows", minimum=1, maximum=100)],
        "/api/datasets/{name}/versions/{v}/lineage": [
            param("depth", "query", "integer", "downstream levels", minimum=1, maximum=MAX_DEPTH)
        ],
    }  # fmt: skip
    error = {
        "description": 'an error: {"error": message}',
        "content": {
            "application/json": {
                "schema": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
            }
        },
    }
    paths: dict[str, Any] = {}
    for path, summary in API_SUMMARIES.items():
        params = [param(p, "path", "string", f"the {'dataset name' if p == 'name' else 'version'}")
                  for p in ("name", "v") if "{" + p + "}" in path]  # fmt: skip
        params += query_params.get(path, [])
        paths[path] = {"get": {
            "summary": summary,
            "operationId": "get" + "".join(w.strip("{}").title() for w in path.split("/")[1:]).replace(".", ""),
            "parameters": params,
            "responses": {
                "200": {"description": "JSON", "content": {"application/json": {"schema": {}}}},
                "400": error, "404": error, "503": error,
            },
        }}  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "dal ui", "version": __version__,
                 "description": "The read-only JSON API of a dal catalog (dal ui): GET and HEAD only."},
        "paths": paths,
    }  # fmt: skip


def create_app(cat: Catalog, *, token: str | None = None, loopback: bool = True) -> ASGIApp:
    """The ASGI app over ``cat``. ``loopback``: only answer requests addressed to a loopback host name
    (a DNS-rebinding page cannot reach it through another name)."""
    env = Environment(
        loader=FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _human_int
    env.filters["size"] = _human_size
    catalog_url = mask_url(cat.url)

    def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(catalog_url=catalog_url, **context)
        return HTMLResponse(html, status)

    def api(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                _check_path(request)
                body = fn(request)
                status = 200
            except DalError as e:
                body, status = {"error": _message(e)}, _status(e)
            except Exception as e:
                if not is_foreign(e):
                    _log.exception("dal ui: %s failed", request.url.path)
                    body, status = {"error": "internal error in dal ui (see the server's log)"}, 500
                else:
                    body, status = {"error": _message(translate(e, request.url.path))}, 502
            return Response(views.to_json(body), status, media_type="application/json")

        return endpoint

    def html(fn: Callable[[Request], HTMLResponse]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                _check_path(request)
                return fn(request)
            except DalError as e:
                return page("error.html", _status(e), message=_message(e))
            except Exception as e:
                if is_foreign(e):
                    return page("error.html", 502, message=_message(translate(e, request.url.path)))
                _log.exception("dal ui: %s failed", request.url.path)
                return page("error.html", 500, message="internal error in dal ui (see the server's log)")

        return endpoint

    def _listing(request: Request) -> dict[str, Any]:
        query = request.query_params.get("q") or None
        per_page = _int_param(request, "per_page", PER_PAGE, 1, MAX_PER_PAGE)
        filters = {k: v for k in FACETS if (v := request.query_params.get(k))}
        for k, v in filters.items():
            if len(v) > 200:
                raise _BadRequest(f"{k} must be at most 200 characters")
        sort = request.query_params.get("sort") or "name"
        if sort not in SORTS and sort.lstrip("-") not in {s.lstrip("-") for s in SORTS}:
            raise _BadRequest(f"sort must be one of {', '.join(SORTS)}, not {sort[:40]!r}")
        total = cat.count_datasets(query, filters)
        pages = max(1, math.ceil(total / per_page))
        page_no = _int_param(request, "page", 1, 1, 10**9)
        rows = cat.search_datasets(query, limit=per_page, offset=(page_no - 1) * per_page, filters=filters, sort=sort)
        items = []
        for d, row_count, size in rows:
            item = views.dataset_dict(d)
            item["latest_row_count"] = row_count
            item["latest_size_bytes"] = size
            items.append(item)
        return {
            "query": query,
            "filters": filters,
            "sort": sort,
            "page": page_no,
            "pages": pages,
            "per_page": per_page,
            "total": total,
            "facets": cat.facets(query, filters),
            "datasets": items,
        }

    # -- JSON API ------------------------------------------------------------------------------------

    def api_datasets(request: Request) -> Any:
        return _listing(request)

    def api_dataset(request: Request) -> Any:
        return views.show(cat, request.path_params["name"])

    def api_versions(request: Request) -> Any:
        limit = _int_param(request, "limit", 0, 0, 10**9)  # the newest N; 0 (default): all
        check = bool(_int_param(request, "check", 0, 0, 1))  # storage round trips: only when asked
        return views.versions(cat, request.path_params["name"], limit or None, check=check)

    def api_schema(request: Request) -> Any:
        return views.schema(cat, request.path_params["name"], _version_param(request, "version"))

    def api_diff(request: Request) -> Any:
        old, new = _version_param(request, "old"), _version_param(request, "new")
        if old is None or new is None:
            raise _BadRequest("diff needs both ?old=VERSION and ?new=VERSION (numbers, tags or timestamps)")
        return views.diff(cat, request.path_params["name"], old, new)

    def api_partitions(request: Request) -> Any:
        return views.partitions(cat, request.path_params["name"], _version_param(request, "version"))

    def api_tags(request: Request) -> Any:
        return views.tags(cat, request.path_params["name"])

    def api_index(request: Request) -> Any:
        return {
            "name": "dal ui",
            "read_only": True,
            "openapi": "/api/openapi.json",
            "endpoints": [{"path": path, "summary": summary} for path, summary in API_SUMMARIES.items()],
        }

    def api_openapi(request: Request) -> Any:
        return openapi_document()

    def api_lineage(request: Request) -> Any:
        depth = _int_param(request, "depth", 1, 1, 20)
        return _lineage(cat, request.path_params["name"], request.path_params["v"], depth)

    def api_preview(request: Request) -> Any:
        rows = _int_param(request, "rows", 10, 1, 100)
        return preview(cat, request.path_params["name"], _version_param(request, "version"), rows)

    # -- pages ---------------------------------------------------------------------------------------

    def index(request: Request) -> HTMLResponse:
        listing = _listing(request)

        def link(page_no: int) -> str:
            params = {"page": str(page_no)}
            if listing["query"]:
                params["q"] = listing["query"]
            params.update(listing["filters"])
            if listing["sort"] != "name":
                params["sort"] = listing["sort"]
            if listing["per_page"] != PER_PAGE:
                params["per_page"] = str(listing["per_page"])
            return "/?" + urlencode(params)

        return page("index.html", listing=listing, link=link, sorts=SORTS)

    def dataset_page(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        info = cat.get_dataset(name)
        history = cat.versions(name, limit=MAX_HISTORY)  # the newest: a dataset may have many thousands
        asked = _version_param(request, "v")
        current = _pick(history, asked) if history else None
        if history and current is None:  # a tag, a time, or a version older than the page lists
            current = cat.version(name, asked)
        parts = cat.partitions(name, current.number) if current else ()
        rows_chart = bytes_chart = parts_chart = None
        if history:

            def per_version(value: Callable[[VersionInfo], int], label: Callable[[VersionInfo], str], what: str) -> str:
                # no links on the bars: hundreds of versions would be hundreds of tab stops; the versions table
                # beside the charts links each version
                bars = [
                    Bar(str(v.number), value(v), f"version {v.number}: {label(v)}" + (" (expired)" if v.unavailable
                        else ""), None, current is not None and v.number == current.number)
                    for v in history
                ]  # fmt: skip
                return bar_chart(bars, title=f"{what} per version", element_id=f"{what}-chart")

            rows_chart = per_version(lambda v: v.row_count, lambda v: f"{v.row_count:,} rows", "rows")
            bytes_chart = per_version(lambda v: v.size_bytes, lambda v: size_text(v.size_bytes), "bytes")
        if parts:
            shown = sorted(parts, key=lambda p: -p.size_bytes)[:MAX_PARTITION_BARS]
            parts_chart = hbar_chart(
                [Bar(p.key, p.size_bytes, f"{size_text(p.size_bytes)}, {p.row_count:,} rows") for p in shown],
                title=f"size per partition (largest {len(shown)} of {len(parts)})"
                if len(parts) > len(shown)
                else "size per partition",
                element_id="partitions-chart",
            )
        newest_first = list(reversed(history))
        vpages = max(1, math.ceil(len(newest_first) / VERSIONS_PER_PAGE))
        vpage = _int_param(request, "vpage", 1, 1, vpages)
        depth = _int_param(request, "depth", DEFAULT_TREE_DEPTH, 1, MAX_DEPTH)
        trees = None
        if current is not None:
            full = _lineage(cat, name, current, depth)
            upstream_tree, upstream_cut = _upstream_items(cat, name, current.number, depth)
            downstream_tree = _downstream_items(full.get("downstream") or [])
            trees = {
                "upstream": upstream_tree,
                "upstream_cut": upstream_cut,
                "downstream": downstream_tree,
                "count": _count_items(upstream_tree) + _count_items(downstream_tree),
            }

        def vlink(n: int) -> str:
            params = {"vpage": str(n)}
            if asked:
                params["v"] = asked
            return f"/d/{quote(name, safe='')}?{urlencode(params)}#versions"

        listed = newest_first[(vpage - 1) * VERSIONS_PER_PAGE : vpage * VERSIONS_PER_PAGE]
        checked = None  # whether the files are in storage: looked at when asked (?check=1), for what the page shows
        if current is not None and _int_param(request, "check", 0, 0, 1):
            from dal.ops import checks

            checked = checks.unreadable(info, [current, *(v for v in listed if v.number != current.number)])
        readable = next((v for v in newest_first if not v.unavailable and not (checked or {}).get(v.number)), None)
        return page(
            "dataset.html",
            info=info,
            checked=checked,
            check_link=None if current is None else vlink(vpage).replace("#versions", "&check=1#version-card"),
            versions_page=listed,
            vpage=vpage,
            vpages=vpages,
            vlink=vlink,
            depth=depth,
            max_depth=MAX_DEPTH,
            trees=trees,
            readable=readable,
            location=mask_url(info.location),
            history=list(reversed(history)),
            all_versions=0 if info.latest_version is None else info.latest_version + 1,
            current=current,
            partitions=parts,
            tags=_tags(history) if len(history) == (info.latest_version or 0) + 1 else cat.tags(name),
            lineage=_lineage_view(_lineage(cat, name, current, 1)) if current else None,
            rows_chart=Markup(rows_chart) if rows_chart else None,
            bytes_chart=Markup(bytes_chart) if bytes_chart else None,
            parts_chart=Markup(parts_chart) if parts_chart else None,
        )

    def diff_page(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        info = cat.get_dataset(name)
        history = list(reversed(cat.versions(name)))
        old, new = _version_param(request, "old"), _version_param(request, "new")
        if old is None or new is None:
            raise _BadRequest("a diff needs two versions: ?old=VERSION&new=VERSION")
        d = cat.diff(name, old, new)
        a, b = cat.version(name, old), cat.version(name, new)
        return page("diff.html", info=info, history=history, diff=d, old=a, new=b)

    def preview_page(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        info = cat.get_dataset(name)
        data = preview(cat, name, _version_param(request, "v"), _int_param(request, "rows", 10, 1, 100))
        return page("preview.html", info=info, data=data)

    routes = [
        Route("/api", api(api_index)),
        Route("/api/openapi.json", api(api_openapi)),
        Route("/", html(index)),
        Route("/d/{name}", html(dataset_page)),
        Route("/d/{name}/diff", html(diff_page)),
        Route("/d/{name}/preview", html(preview_page)),
        Route("/api/datasets", api(api_datasets)),
        Route("/api/datasets/{name}", api(api_dataset)),
        Route("/api/datasets/{name}/versions", api(api_versions)),
        Route("/api/datasets/{name}/schema", api(api_schema)),
        Route("/api/datasets/{name}/diff", api(api_diff)),
        Route("/api/datasets/{name}/partitions", api(api_partitions)),
        Route("/api/datasets/{name}/tags", api(api_tags)),
        Route("/api/datasets/{name}/preview", api(api_preview)),
        Route("/api/datasets/{name}/versions/{v}/lineage", api(api_lineage)),
    ]

    def not_found(request: Request, exc: Exception) -> Response:
        """A path no route answers: under /api the API's JSON error like every other, elsewhere Starlette's."""
        if request.url.path == "/api" or request.url.path.startswith("/api/"):
            body = {"error": "no such API endpoint (GET /api lists them)"}
            return Response(views.to_json(body), 404, media_type="application/json")
        return PlainTextResponse("Not Found", 404)

    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))] if loopback else []
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={404: not_found})
    return _Guard(app, token)
