"""Lineage as ``dal ui`` shows it: the JSON record (credentials masked), the dataset page's producer facts and
graph, and its upstream and downstream trees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from dal import lineage
from dal.catalog import Catalog, VersionInfo
from dal.catalog.urls import mask_url
from dal.ui.charts import Node, lineage_graph

MAX_TREE_NODES = 300  # versions one lineage tree lists at most (the rest: the JSON, with ?depth=)
Visible = Callable[[object], bool]  # whether the viewer may read a dataset of that name (dal.ui.web.Scope.visible)


def _everything(name: object) -> bool:
    return True


def _downstream_seen(nodes: list[Any], visible: Visible) -> list[Any]:
    """A downstream tree without the versions of datasets the viewer may not read (nor what was built from them)."""
    out: list[Any] = []
    for d in nodes:
        if isinstance(d, dict) and not d.get("truncated"):
            if not visible(d.get("dataset")):
                continue
            if isinstance(d.get("downstream"), list):
                d = {**d, "downstream": _downstream_seen(d["downstream"], visible)}
        out.append(d)
    return out


def lineage_json(
    cat: Catalog, name: str, version: str | int | VersionInfo | None, depth: int, visible: Visible = _everything
) -> dict[str, Any]:
    """What ``dal lineage NAME V --json`` prints (the same builder), with the program path and Spark master masked
    once more: a record written by another tool (or an older dal) must not show a credential here either. Only the
    upstream and downstream versions of datasets ``visible`` (the viewer may read) are kept, as ``dal serve``'s
    lineage routes keep only edges whose other end the principal may read; a name read under an older name keeps
    that name only when it is visible too."""
    out = lineage.lineage(cat, name, version, depth=depth)
    if visible is not _everything:
        kept = [u for u in out.get("upstream") or [] if isinstance(u, dict) and visible(u.get("dataset"))]
        out["upstream"] = [u if visible(u.get("recorded_as", u.get("dataset"))) else
                           {k: x for k, x in u.items() if k != "recorded_as"} for u in kept]  # fmt: skip
        out["downstream"] = _downstream_seen(out.get("downstream") or [], visible)
    if out.get("program"):
        out["program"] = mask_url(out["program"])
    spark = out.get("spark")
    if isinstance(spark, dict) and spark.get("master"):
        out["spark"] = {**spark, "master": mask_url(spark["master"])}
    return out


def version_link(dataset: object, version: object) -> str:
    return f"/d/{quote(str(dataset), safe='')}?v={quote(str(version), safe='')}"


def _how(edge: dict[str, Any]) -> str:
    """How an edge is known, as the graph labels it: ``declared`` only when the record says so."""
    return "declared" if edge.get("how") == "declared" else "inferred"


def downstream_items(nodes: list[Any]) -> list[dict[str, Any]]:
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
            "href": version_link(d["dataset"], d["version"]),
            "how": _how(d),
            "children": downstream_items(d.get("downstream") or []),
        })  # fmt: skip
    return items


def upstream_items(
    cat: Catalog, name: str, number: int, depth: int, visible: Visible = _everything
) -> tuple[list[dict[str, Any]], bool]:
    """What built ``name`` @ ``number``, and what built that, ``depth`` hops up (each version once; at most
    MAX_TREE_NODES, then cut: the second value says so), from the catalog's lineage edges; only versions of
    datasets ``visible`` (a hidden one's own upstream is not walked either)."""
    seen: set[tuple[str, int]] = {(name, number)}
    cut = [False]

    def walk(ds: str, v: int, hops: int) -> list[dict[str, Any]]:
        items = []
        for e in cat.upstream(ds, v):
            key = (e.upstream, e.upstream_version)
            if key in seen or not visible(e.upstream):
                continue
            if len(seen) > MAX_TREE_NODES:
                cut[0] = True
                break
            seen.add(key)
            items.append({
                "label": f"{e.upstream} @ {e.upstream_version}" + (f" where {e.filters}" if e.filters else ""),
                "href": version_link(e.upstream, e.upstream_version),
                "how": "declared" if e.how == "declared" else "inferred",
                "children": walk(e.upstream, e.upstream_version, hops - 1) if hops > 1 else [],
            })  # fmt: skip
        return items

    return walk(name, number, depth), cut[0]


def count_items(items: list[dict[str, Any]]) -> int:
    return sum(1 + count_items(i.get("children") or []) for i in items if "label" in i)


def trees(cat: Catalog, name: str, current: VersionInfo, depth: int, visible: Visible = _everything) -> dict[str, Any]:
    """The dataset page's lineage trees of ``current``, ``depth`` hops up and down (datasets ``visible`` only)."""
    full = lineage_json(cat, name, current, depth, visible)
    upstream_tree, upstream_cut = upstream_items(cat, name, current.number, depth, visible)
    downstream_tree = downstream_items(full.get("downstream") or [])
    return {
        "upstream": upstream_tree,
        "upstream_cut": upstream_cut,
        "downstream": downstream_tree,
        "count": count_items(upstream_tree) + count_items(downstream_tree),
    }


def lineage_view(out: dict[str, Any]) -> dict[str, Any]:
    """The dataset page's lineage section: producer facts and the graph (None when there is nothing to draw)."""
    upstream, downstream = upstream_nodes(out), downstream_nodes(out)
    this = Node(f"{out['dataset']} @ {out['version']}", f"{out['dataset']} @ version {out['version']}")
    graph = (
        Markup(lineage_graph(upstream, this, downstream, element_id="lineage-graph"))
        if upstream or downstream
        else None
    )
    return {**producer(out), "graph": graph}


def upstream_nodes(out: dict[str, Any]) -> list[Node]:
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
        upstream.append(Node(f"{key[0]} @ {key[1]}", tip, version_link(*key), _how(u)))
    return upstream


def downstream_nodes(out: dict[str, Any]) -> list[Node]:
    return [
        Node(f"{d['dataset']} @ {d['version']}", f"{d['dataset']} @ version {d['version']}",
             version_link(d["dataset"], d["version"]), _how(d))
        for d in out.get("downstream") or []
        if isinstance(d, dict) and not d.get("truncated")
    ]  # fmt: skip


def producer(out: dict[str, Any]) -> dict[str, Any]:
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
