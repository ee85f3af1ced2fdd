"""The ``dal ui`` web app: catalog pages and a JSON API, read-only, over one ``Catalog``.

Pages are server-rendered Jinja templates (autoescaped) with inline SVG charts: no JavaScript, no CDN.
A strict Content-Security-Policy forbids scripts altogether, so an escaping slip could not run one either.
Only GET and HEAD are served (anything else is 405), and with a token every request must carry it.
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

from catalog import Catalog, VersionInfo
from catalog.errors import CatalogUnavailable, DalError, NotFound
from catalog.urls import mask_text, mask_url
from dal import lineage
from dal.errors import is_foreign, one_line, translate
from dal.ops import views
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
                response = RedirectResponse(request.url.path + (f"?{urlencode(rest)}" if rest else ""), 303)
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
    return raw if raw else None


class _BadRequest(DalError):
    """A malformed query parameter (400)."""


def _status(e: DalError) -> int:
    if isinstance(e, NotFound):
        return 404
    if isinstance(e, CatalogUnavailable):
        return 503
    return 400


def _message(e: BaseException) -> str:
    return mask_text(one_line(e))


def _human_int(n: object) -> str:
    return "-" if n is None else f"{n:,}"


def _human_size(n: object) -> str:
    return "-" if n is None else views.size_text(int(n))  # type: ignore[call-overload]


def _lineage(cat: Catalog, name: str, version: str | int | None, depth: int) -> dict[str, Any]:
    """What ``dal lineage NAME V --json`` prints (the same builder), with the program path and Spark master masked
    once more: a record written by another tool (or an older dal) must not show a credential here either."""
    out = lineage.lineage(cat, name, version, depth=depth)
    if out.get("program"):
        out["program"] = mask_url(out["program"])
    spark = out.get("spark")
    if isinstance(spark, dict) and spark.get("master"):
        out["spark"] = {**spark, "master": mask_url(spark["master"])}
    return out


def _version_link(dataset: object, version: object) -> str:
    return f"/d/{quote(str(dataset), safe='')}?v={quote(str(version), safe='')}"


def _lineage_view(out: dict[str, Any]) -> dict[str, Any]:
    """The dataset page's lineage section: producer facts and the graph (None when there is nothing to draw)."""
    git = out.get("git") if isinstance(out.get("git"), dict) else None
    spark = out.get("spark") if isinstance(out.get("spark"), dict) else None
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
        upstream.append(Node(f"{key[0]} @ {key[1]}", tip, _version_link(*key)))
    downstream = [
        Node(f"{d['dataset']} @ {d['version']}", f"{d['dataset']} @ version {d['version']}",
             _version_link(d["dataset"], d["version"]))
        for d in out.get("downstream") or []
    ]  # fmt: skip
    this = Node(f"{out['dataset']} @ {out['version']}", f"{out['dataset']} @ version {out['version']}")
    graph = (
        Markup(lineage_graph(upstream, this, downstream, element_id="lineage-graph"))
        if upstream or downstream
        else None
    )
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
        "graph": graph,
    }


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
        total = cat.count_datasets(query)
        pages = max(1, math.ceil(total / per_page))
        page_no = _int_param(request, "page", 1, 1, 10**9)
        rows = cat.search_datasets(query, limit=per_page, offset=(page_no - 1) * per_page)
        items = []
        for d, row_count, size in rows:
            item = views.dataset_dict(d)
            item["latest_row_count"] = row_count
            item["latest_size_bytes"] = size
            items.append(item)
        return {
            "query": query,
            "page": page_no,
            "pages": pages,
            "per_page": per_page,
            "total": total,
            "datasets": items,
        }

    # -- JSON API ------------------------------------------------------------------------------------

    def api_datasets(request: Request) -> Any:
        return _listing(request)

    def api_dataset(request: Request) -> Any:
        return views.show(cat, request.path_params["name"])

    def api_versions(request: Request) -> Any:
        return views.versions(cat, request.path_params["name"])

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
            if listing["per_page"] != PER_PAGE:
                params["per_page"] = str(listing["per_page"])
            return "/?" + urlencode(params)

        return page("index.html", listing=listing, link=link)

    def dataset_page(request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        info = cat.get_dataset(name)
        history = cat.versions(name)
        current = cat.version(name, _version_param(request, "v")) if history else None
        parts = cat.partitions(name, current.number) if current else ()
        base = f"/d/{name}?v="
        rows_chart = bytes_chart = parts_chart = None
        if history:

            def per_version(value: Callable[[VersionInfo], int], label: Callable[[VersionInfo], str], what: str) -> str:
                bars = [
                    Bar(str(v.number), value(v), f"version {v.number}: {label(v)}", base + str(v.number),
                        current is not None and v.number == current.number)
                    for v in history
                ]  # fmt: skip
                return bar_chart(bars, title=f"{what} per version", element_id=f"{what}-chart")

            rows_chart = per_version(lambda v: v.row_count, lambda v: f"{v.row_count:,} rows", "rows")
            bytes_chart = per_version(lambda v: v.size_bytes, lambda v: views.size_text(v.size_bytes), "bytes")
        if parts:
            shown = sorted(parts, key=lambda p: -p.size_bytes)[:MAX_PARTITION_BARS]
            parts_chart = hbar_chart(
                [Bar(p.key, p.size_bytes, f"{views.size_text(p.size_bytes)}, {p.row_count:,} rows") for p in shown],
                title=f"size per partition (largest {len(shown)} of {len(parts)})"
                if len(parts) > len(shown)
                else "size per partition",
                element_id="partitions-chart",
            )
        return page(
            "dataset.html",
            info=info,
            location=mask_url(info.location),
            history=list(reversed(history)),
            current=current,
            partitions=parts,
            tags=cat.tags(name),
            lineage=_lineage_view(_lineage(cat, name, current.number, 1)) if current else None,
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
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))] if loopback else []
    app = Starlette(routes=routes, middleware=middleware)
    return _Guard(app, token)
