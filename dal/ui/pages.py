"""The HTML pages of ``dal ui``: the dataset index, a dataset's page, a schema diff and a preview. Each handler
takes the ``Ui`` context and the request; markup lives in the templates."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from dal.catalog import DatasetInfo, Partition, VersionInfo
from dal.catalog.errors import DalError
from dal.catalog.types import labels_dict
from dal.catalog.urls import mask_url
from dal.progress import size_text
from dal.storage import uris
from dal.ui import lineage_view
from dal.ui.api import MAX_DEPTH
from dal.ui.charts import Bar, bar_chart, hbar_chart
from dal.ui.preview import preview
from dal.ui.web import PER_PAGE, SORTS, BadRequest, Ui, int_param, message, version_param

MAX_PARTITION_BARS = 60
MAX_HISTORY = 500  # versions on a dataset's page (charts, pickers); all of them: /api/datasets/NAME/versions
VERSIONS_PER_PAGE = 25  # rows of the versions table beside the charts (?vpage=)
DEFAULT_TREE_DEPTH = 3  # hops of the lineage trees on a dataset's page (?depth=)
# column statistics (dal stats: one Parquet footer read per file) are computed when the page is viewed for a
# version of at most this many files; a larger one has a link (?stats=1) that computes them when asked
MAX_STATS_FILES = 64


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


def index(ui: Ui, request: Request) -> HTMLResponse:
    listing = ui.listing(request)

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

    return ui.page("index.html", listing=listing, link=link, sorts=SORTS)


def _version_charts(history: list[VersionInfo], current: VersionInfo | None) -> tuple[Markup | None, Markup | None]:
    """Rows and bytes per version, the current one highlighted (None without versions)."""
    if not history:
        return None, None

    def per_version(value: Callable[[VersionInfo], int], label: Callable[[VersionInfo], str], what: str) -> Markup:
        # no links on the bars: hundreds of versions would be hundreds of tab stops; the versions table beside the
        # charts links each version
        bars = [
            Bar(str(v.number), value(v), f"version {v.number}: {label(v)}" + (" (expired)" if v.unavailable
                else ""), None, current is not None and v.number == current.number)
            for v in history
        ]  # fmt: skip
        return Markup(bar_chart(bars, title=f"{what} per version", element_id=f"{what}-chart"))

    rows = per_version(lambda v: v.row_count, lambda v: f"{v.row_count:,} rows", "rows")
    return rows, per_version(lambda v: v.size_bytes, lambda v: size_text(v.size_bytes), "bytes")


def _partitions_chart(parts: tuple[Partition, ...]) -> Markup | None:
    """Size per partition, the largest ``MAX_PARTITION_BARS`` (None when not partitioned)."""
    if not parts:
        return None
    shown = sorted(parts, key=lambda p: -p.size_bytes)[:MAX_PARTITION_BARS]
    return Markup(
        hbar_chart(
            [Bar(p.key, p.size_bytes, f"{size_text(p.size_bytes)}, {p.row_count:,} rows") for p in shown],
            title=f"size per partition (largest {len(shown)} of {len(parts)})"
            if len(parts) > len(shown)
            else "size per partition",
            element_id="partitions-chart",
        )
    )


def _checked(
    ui: Ui, request: Request, info: DatasetInfo, current: VersionInfo | None, listed: list[VersionInfo]
) -> dict[int, str | None] | None:
    """Whether the files are in storage: looked at when asked (?check=1), for what the page shows."""
    if current is None or not int_param(request, "check", 0, 0, 1):
        return None
    from dal.ops import checks

    return checks.unreadable(info, [current, *(v for v in listed if v.number != current.number)])


def _column_stats(ui: Ui, request: Request, location: str, current: VersionInfo | None) -> dict[str, Any] | None:
    """The current version's column statistics as ``dal stats`` computes them (nulls, min, max, distinct), on view
    for a version of at most ``MAX_STATS_FILES`` files on local storage, else when asked (?stats=1: object storage
    round trips only then, as ``?check=1``); ``error``: why there are none (an expired version, a footer that
    cannot be read), never a failed page."""
    if current is None:
        return None
    asked = bool(int_param(request, "stats", 0, 0, 1))
    if not asked and (current.file_count > MAX_STATS_FILES or not uris.is_local(location)):
        return {"columns": None, "deferred": True, "files": current.file_count, "remote": not uris.is_local(location)}
    if current.unavailable:
        return {"columns": None, "error": f"version {current.number} has expired"}
    from dal.ops import lifecycle

    try:
        st = lifecycle.stats(current.dataset, current.number, catalog=ui.cat)
    except DalError as e:
        return {"columns": None, "error": message(e)}
    return {"columns": [c.to_dict() for c in st.columns], "exact": st.exact, "files": st.files}


def dataset(ui: Ui, request: Request) -> HTMLResponse:
    cat = ui.cat
    name = request.path_params["name"]
    info = cat.get_dataset(name)
    history = cat.versions(name, limit=MAX_HISTORY)  # the newest: a dataset may have many thousands
    asked = version_param(request, "v")
    current = _pick(history, asked) if history else None
    if history and current is None:  # a tag, a time, or a version older than the page lists
        current = cat.version(name, asked)
    parts = cat.partitions(name, current.number) if current else ()
    rows_chart, bytes_chart = _version_charts(history, current)
    newest_first = list(reversed(history))
    vpages = max(1, math.ceil(len(newest_first) / VERSIONS_PER_PAGE))
    vpage = int_param(request, "vpage", 1, 1, vpages)
    depth = int_param(request, "depth", DEFAULT_TREE_DEPTH, 1, MAX_DEPTH)
    trees = None if current is None else lineage_view.trees(cat, name, current, depth, ui.scope.visible)

    def vlink(n: int) -> str:
        params = {"vpage": str(n)}
        if asked:
            params["v"] = asked
        return f"/d/{quote(name, safe='')}?{urlencode(params)}#versions"

    listed = newest_first[(vpage - 1) * VERSIONS_PER_PAGE : vpage * VERSIONS_PER_PAGE]
    checked = _checked(ui, request, info, current, listed)
    readable = next((v for v in newest_first if not v.unavailable and not (checked or {}).get(v.number)), None)
    context: dict[str, Any] = {
        "info": info,
        "labels": labels_dict(cat.labels(name)),
        "checked": checked,
        "check_link": None if current is None else vlink(vpage).replace("#versions", "&check=1#version-card"),
        "versions_page": listed,
        "vpage": vpage,
        "vpages": vpages,
        "vlink": vlink,
        "depth": depth,
        "max_depth": MAX_DEPTH,
        "trees": trees,
        "readable": readable,
        "location": mask_url(info.location),
        "history": newest_first,
        "all_versions": 0 if info.latest_version is None else info.latest_version + 1,
        "current": current,
        "partitions": parts,
        "tags": _tags(history) if len(history) == (info.latest_version or 0) + 1 else cat.tags(name),
        "lineage": lineage_view.lineage_view(lineage_view.lineage_json(cat, name, current, 1, ui.scope.visible))
        if current
        else None,
        "rows_chart": rows_chart,
        "bytes_chart": bytes_chart,
        "parts_chart": _partitions_chart(parts),
        "column_stats": _column_stats(ui, request, info.location, current),
    }
    return ui.page("dataset.html", **context)


def diff(ui: Ui, request: Request) -> HTMLResponse:
    name = request.path_params["name"]
    info = ui.cat.get_dataset(name)
    history = list(reversed(ui.cat.versions(name)))
    old, new = version_param(request, "old"), version_param(request, "new")
    if old is None or new is None:
        raise BadRequest("a diff needs two versions: ?old=VERSION&new=VERSION")
    d = ui.cat.diff(name, old, new)
    a, b = ui.cat.version(name, old), ui.cat.version(name, new)
    return ui.page("diff.html", info=info, history=history, diff=d, old=a, new=b)


def rows(ui: Ui, request: Request) -> HTMLResponse:
    name = request.path_params["name"]
    info = ui.cat.get_dataset(name)
    data = preview(ui.cat, name, version_param(request, "v"), int_param(request, "rows", 10, 1, 100))
    return ui.page("preview.html", info=info, data=data)


# path -> handler, in the order the app routes them
HANDLERS = {
    "/": index,
    "/d/{name}": dataset,
    "/d/{name}/diff": diff,
    "/d/{name}/preview": rows,
}
