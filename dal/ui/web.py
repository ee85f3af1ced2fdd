"""What every ``dal ui`` route shares: the ``Ui`` context (the catalog, the templates, the masked catalog URL, the
``Scope`` of datasets the viewer may read) the handlers take instead of closures, the wrappers that turn a handler's
value or ``DalError`` into a JSON or HTML response, query-parameter parsing, and the dataset listing both the index
page and ``/api/datasets`` show."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from dal.catalog import Catalog
from dal.catalog.auth import matches
from dal.catalog.errors import CatalogUnavailable, DalError, DatasetNotFound, NotFound
from dal.catalog.urls import mask_text, mask_url
from dal.errors import is_foreign, one_line, translate
from dal.lineage import KEY as LINEAGE_KEY
from dal.ops import views
from dal.progress import size_text

PER_PAGE = 50
MAX_PER_PAGE = 200
# characters of a path segment or a version parameter: names have at most 200 (catalog.types), versions (numbers,
# tags, times) fewer; a longer one is refused before any lookup (error messages would repeat all of it)
MAX_SEGMENT = 1000
FACETS = ("format", "owner", "tag", "label", "column")
SORTS = {
    "name": "name",
    "-updated": "recently updated",
    "-rows": "most rows",
    "-size": "largest",
    "updated": "least recently updated",
    "-name": "name, Z to A",
}
_log = logging.getLogger("dal.ui")


class BadRequest(DalError):
    """A malformed query parameter (400)."""


class NoPage(DalError):
    """A path with a segment no dataset or version has (404)."""


def int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise BadRequest(f"{name} must be a whole number in [{lo}, {hi}], not {raw[:40]!r}")
    return max(lo, min(int(raw), hi))


def version_param(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if raw and len(raw) > MAX_SEGMENT:
        raise BadRequest(f"{name} must be a version number, tag or time of at most {MAX_SEGMENT} characters")
    return raw if raw else None


def check_path(request: Request) -> None:
    """Refuse (404) a path segment longer than ``MAX_SEGMENT``: no dataset or version is named that long."""
    if any(len(str(v)) > MAX_SEGMENT for v in request.path_params.values()):
        raise NoPage(f"no such page: a path segment is longer than {MAX_SEGMENT} characters (no name or version is)")


def status_of(e: DalError) -> int:
    if isinstance(e, NotFound | NoPage):
        return 404
    if isinstance(e, CatalogUnavailable):
        return 503
    return 400


def message(e: BaseException) -> str:
    return mask_text(one_line(e))


def human_int(n: object) -> str:
    return "-" if n is None else f"{n:,}"


def human_size(n: object) -> str:
    return "-" if n is None else size_text(int(n))  # type: ignore[call-overload]


def json_response(body: Any, status: int = 200) -> Response:
    return Response(views.to_json(body), status, media_type="application/json")


Handler = Callable[["Ui", Request], Any]


@dataclass(frozen=True)
class Scope:
    """The datasets a viewer may read: every one (``dal ui``), or those a principal's grant targets cover (``dal
    serve``: every grant includes READ). The one filter every route's answer passes: a name outside it is answered
    as a dataset that does not exist, and no list, count, suggestion or lineage edge names one."""

    targets: tuple[str, ...] | None = None  # None: every dataset

    @property
    def everything(self) -> bool:
        return self.targets is None or "*" in self.targets

    def visible(self, name: object) -> bool:
        return self.targets is None or (isinstance(name, str) and any(matches(t, name) for t in self.targets))

    def not_found(self, cat: Catalog, name: str) -> DatasetNotFound:
        """The one error of a dataset that does not exist and of one outside the scope: close names among the
        visible ones only."""
        return DatasetNotFound(f"dataset {name!r}", name, [d.name for d in cat.list_datasets() if self.visible(d.name)])

    def scrub(self, found: Any) -> Any:
        """``found`` (JSON) with every version's lineage record (``properties["lineage"]["upstream"]``) cut to the
        inputs the viewer may read, as ``dal serve``'s answers are."""
        if self.everything:
            return found
        if isinstance(found, list):
            return [self.scrub(x) for x in found]
        if not isinstance(found, dict):
            return found
        out = {k: self.scrub(v) for k, v in found.items()}
        props = out.get("properties")
        record = props.get(LINEAGE_KEY) if isinstance(props, dict) else None
        if isinstance(record, dict) and isinstance(record.get("upstream"), list):
            kept = [u for u in record["upstream"] if isinstance(u, dict) and self.visible(u.get("dataset"))]
            out["properties"] = {**props, LINEAGE_KEY: {**record, "upstream": kept}}  # type: ignore[dict-item]
        return out


@dataclass(frozen=True)
class Ui:
    """What a route handler needs: the catalog, the page templates and the catalog's URL as pages show it."""

    cat: Catalog
    env: Environment
    catalog_url: str
    scope: Scope = field(default_factory=Scope)
    who: str | None = None  # the signed-in principal (dal serve), shown with a sign-out button
    csrf: str | None = None  # the sign-out form's anti-forgery value (dal serve)

    @classmethod
    def over(cls, cat: Catalog) -> Ui:
        env = Environment(
            loader=FileSystemLoader(Path(__file__).with_name("templates")),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters["num"] = human_int
        env.filters["size"] = human_size
        return cls(cat, env, mask_url(cat.url))

    def page(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(
            catalog_url=self.catalog_url, who=self.who, csrf=self.csrf, **context
        )
        return HTMLResponse(html, status)

    def api(self, handler: Handler) -> Callable[[Request], Response]:
        """A JSON endpoint: the handler's value, or ``{"error": …}`` with the status its error calls for."""
        return partial(self._answer_json, handler)

    def html(self, handler: Callable[[Ui, Request], HTMLResponse]) -> Callable[[Request], Response]:
        """A page: the handler's, or the error page with the status its error calls for."""
        return partial(self._answer_html, handler)

    def check(self, request: Request) -> None:
        """Refuse (404) a path segment no name has, and a dataset outside the scope as one that does not exist."""
        check_path(request)
        name = request.path_params.get("name")
        if name is not None and not self.scope.visible(name):
            raise self.scope.not_found(self.cat, str(name))

    def _hidden(self, e: DalError, request: Request) -> DalError:
        """A dataset that does not exist, as a viewer with a scope hears of it: close names it may read only."""
        if isinstance(e, DatasetNotFound) and self.scope.targets is not None:
            return self.scope.not_found(self.cat, str(request.path_params.get("name", "")))
        return e

    def _answer_json(self, handler: Handler, request: Request) -> Response:
        try:
            self.check(request)
            return json_response(self.scope.scrub(handler(self, request)))
        except DalError as e:
            e = self._hidden(e, request)
            return json_response({"error": message(e)}, status_of(e))
        except Exception as e:
            if not is_foreign(e):
                _log.exception("dal ui: %s failed", request.url.path)
                return json_response({"error": "internal error in dal ui (see the server's log)"}, 500)
            return json_response({"error": message(translate(e, request.url.path))}, 502)

    def _answer_html(self, handler: Callable[[Ui, Request], HTMLResponse], request: Request) -> Response:
        try:
            self.check(request)
            return handler(self, request)
        except DalError as e:
            e = self._hidden(e, request)
            return self.page("error.html", status_of(e), message=message(e))
        except Exception as e:
            if is_foreign(e):
                return self.page("error.html", 502, message=message(translate(e, request.url.path)))
            _log.exception("dal ui: %s failed", request.url.path)
            return self.page("error.html", 500, message="internal error in dal ui (see the server's log)")

    def listing(self, request: Request) -> dict[str, Any]:
        """One page of the searched, filtered and sorted datasets, with the facets' counts (the index page and
        ``/api/datasets``)."""
        query = request.query_params.get("q") or None
        per_page = int_param(request, "per_page", PER_PAGE, 1, MAX_PER_PAGE)
        filters = {k: v for k in FACETS if (v := request.query_params.get(k))}
        for k, v in filters.items():
            if len(v) > 200:
                raise BadRequest(f"{k} must be at most 200 characters")
        sort = request.query_params.get("sort") or "name"
        if sort not in SORTS and sort.lstrip("-") not in {s.lstrip("-") for s in SORTS}:
            raise BadRequest(f"sort must be one of {', '.join(SORTS)}, not {sort[:40]!r}")
        within = None if self.scope.everything else self.scope.targets  # in the database: pages, counts, facets
        total = self.cat.count_datasets(query, filters, within=within)
        pages = max(1, math.ceil(total / per_page))
        page_no = int_param(request, "page", 1, 1, 10**9)
        rows = self.cat.search_datasets(
            query, limit=per_page, offset=(page_no - 1) * per_page, filters=filters, sort=sort, within=within
        )
        reasons = self.cat.match_reasons(query, [d.name for d, _, _ in rows])
        items = []
        for d, row_count, size in rows:
            item = views.dataset_dict(d)
            item["latest_row_count"] = row_count
            item["latest_size_bytes"] = size
            item["matched"] = [{"in": kind, "value": value} for kind, value in reasons.get(d.name, ())]
            items.append(item)
        return {
            "query": query,
            "filters": filters,
            "sort": sort,
            "page": page_no,
            "pages": pages,
            "per_page": per_page,
            "total": total,
            "facets": self.cat.facets(query, filters, within=within),
            "datasets": items,
        }
