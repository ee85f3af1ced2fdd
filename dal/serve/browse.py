"""The routes of ``dal serve`` that read the catalog as a whole, among the datasets the principal may read: the
datasets with a label (``dal ls --label``) and a search's count and facets (the web UI's side panel).

A count or a facet counts only datasets the principal may read: the grants' targets are a WHERE clause of the
catalog's own queries (``within``), so a principal learns nothing, not even a number, of a dataset it may not read.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from dal.catalog.auth import READ, allows
from dal.catalog.types import parse_label
from dal.serve.common import Server, read_targets


def labelled(server: Server, request: Request, body: bytes) -> Response:
    """``?label=KEY[=VALUE]``: the names of the datasets with that label (``Catalog.labelled``) it may read."""
    _who, grants = server.principal(request, "labelled")
    text = request.query_params.get("label", "")
    parse_label(text)  # InvalidName: 400
    names = sorted(n for n in server.cat.labelled(text) if allows(grants, READ, n))
    return JSONResponse({"label": text, "datasets": names})


def facets(server: Server, request: Request, body: bytes) -> Response:
    """``?q=&f.KEY=VALUE``: how many readable datasets the search finds (``Catalog.count_datasets``) and its facets
    (``Catalog.facets``), both counted among the datasets the principal may read only."""
    _who, grants = server.principal(request, "facets")
    q = request.query_params
    query = q.get("q") or None
    filters = {k[2:]: v for k, v in q.items() if k.startswith("f.")} or None
    within = read_targets(grants)
    count = server.cat.count_datasets(query, filters, within=within)
    return JSONResponse({"count": count, "facets": server.cat.facets(query, filters, within=within)})
