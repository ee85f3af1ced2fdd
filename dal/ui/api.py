"""The JSON API of ``dal ui``: one handler per route (each takes the ``Ui`` context and the request), the
index of the routes and their OpenAPI document."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from dal.ops import views
from dal.ui.lineage_view import lineage_json
from dal.ui.preview import preview
from dal.ui.schemas import RESPONSES, components, ref
from dal.ui.web import FACETS, MAX_PER_PAGE, SORTS, BadRequest, Ui, int_param, version_param

MAX_DEPTH = 20  # lineage hops, as the API allows

API_SUMMARIES = {
    "/api": "this index",
    "/api/openapi.json": "the OpenAPI 3.1 document of this API",
    "/api/datasets": "datasets, paged (?page, ?per_page), searched (?q) and narrowed by facets (?format, ?owner, ?tag, "
    "?label, ?column), sorted (?sort), with each latest version's row count and size, why it matched ?q, and the facets' "
    "counts",
    "/api/datasets/{name}": "a dataset, its newest version with its schema, its tags and labels (dal show --json)",
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
                  "a tag, a label or a column"),
            *[param(f, "query", "string", f"only datasets with this {f} (exact)") for f in FACETS if f != "column"],
            param("column", "query", "string", "only datasets with a column whose name contains this (any case)"),
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
    error = {"description": 'an error: {"error": message}', "content": {"application/json": {"schema": ref("Error")}}}
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
                "200": {"description": "JSON", "content": {"application/json": {"schema": RESPONSES[path]}}},
                "400": error, "404": error, "503": error,
            },
        }}  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "dal ui", "version": __version__,
                 "description": "The read-only JSON API of a dal catalog (dal ui): GET and HEAD only."},
        "paths": paths,
        "components": {"schemas": components()},
    }  # fmt: skip


def datasets(ui: Ui, request: Request) -> Any:
    return ui.listing(request)


def dataset(ui: Ui, request: Request) -> Any:
    return views.show(ui.cat, request.path_params["name"])


def versions(ui: Ui, request: Request) -> Any:
    limit = int_param(request, "limit", 0, 0, 10**9)  # the newest N; 0 (default): all
    check = bool(int_param(request, "check", 0, 0, 1))  # storage round trips: only when asked
    return views.versions(ui.cat, request.path_params["name"], limit or None, check=check)


def schema(ui: Ui, request: Request) -> Any:
    return views.schema(ui.cat, request.path_params["name"], version_param(request, "version"))


def diff(ui: Ui, request: Request) -> Any:
    old, new = version_param(request, "old"), version_param(request, "new")
    if old is None or new is None:
        raise BadRequest("diff needs both ?old=VERSION and ?new=VERSION (numbers, tags or timestamps)")
    return views.diff(ui.cat, request.path_params["name"], old, new)


def partitions(ui: Ui, request: Request) -> Any:
    return views.partitions(ui.cat, request.path_params["name"], version_param(request, "version"))


def tags(ui: Ui, request: Request) -> Any:
    return views.tags(ui.cat, request.path_params["name"])


def index(ui: Ui, request: Request) -> Any:
    return {
        "name": "dal ui",
        "read_only": True,
        "openapi": "/api/openapi.json",
        "endpoints": [{"path": path, "summary": summary} for path, summary in API_SUMMARIES.items()],
    }


def openapi(ui: Ui, request: Request) -> Any:
    return openapi_document()


def version_lineage(ui: Ui, request: Request) -> Any:
    depth = int_param(request, "depth", 1, 1, MAX_DEPTH)
    return lineage_json(ui.cat, request.path_params["name"], request.path_params["v"], depth, ui.scope.visible)


def rows(ui: Ui, request: Request) -> Any:
    count = int_param(request, "rows", 10, 1, 100)
    return preview(ui.cat, request.path_params["name"], version_param(request, "version"), count)


# path -> handler, in the order the app routes them
HANDLERS = {
    "/api": index,
    "/api/openapi.json": openapi,
    "/api/datasets": datasets,
    "/api/datasets/{name}": dataset,
    "/api/datasets/{name}/versions": versions,
    "/api/datasets/{name}/schema": schema,
    "/api/datasets/{name}/diff": diff,
    "/api/datasets/{name}/partitions": partitions,
    "/api/datasets/{name}/tags": tags,
    "/api/datasets/{name}/preview": rows,
    "/api/datasets/{name}/versions/{v}/lineage": version_lineage,
}
