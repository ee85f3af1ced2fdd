"""What the catalog shows, as JSON-ready values: shared by the CLI's ``--json`` output and the web UI's API.

Every function reads the catalog only, except ``versions(check=True)``, which looks in storage too
(``dal.ops.checks``). Dataset locations are masked (``mask_url``): a location stored by an
older dal with credentials in it never reaches a terminal or a browser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dal.catalog.types import DatasetInfo, VersionInfo, labels_dict
from dal.catalog.urls import mask_url

if TYPE_CHECKING:
    from dal.catalog import Catalog
    from dal.catalog.lite import CatalogReader

VersionArg = int | str | None


def dataset_dict(d: DatasetInfo) -> dict[str, Any]:
    """A dataset for JSON output; a location stored by an older dal with credentials in it is masked."""
    out = d.to_dict()
    out["location"] = mask_url(d.location)
    return out


def show(cat: CatalogReader, name: str) -> dict[str, Any]:
    """A dataset, its newest version with its schema, every tag with the version it names, and the labels of the
    dataset and of its columns (``dal show --json``)."""
    ds = cat.get_dataset(name)
    latest = cat.version(name) if ds.latest_version is not None else None
    out = dataset_dict(ds)
    out["latest"] = latest.to_dict(with_schema=True) if latest else None
    out["tags"] = cat.tags(name)
    out["labels"] = labels_dict(cat.labels(name))
    return out


def versions(
    cat: CatalogReader,
    name: str,
    limit: int | None = None,
    *,
    check: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The history of a dataset, oldest first (``dal versions --json``); ``limit``: the newest ``limit`` only.

    Each version says whether it can be ``readable``: false where the catalog marks it expired or unavailable;
    otherwise null (the catalog alone cannot tell), or, with ``check``, whether every file it pins is in storage
    (``unreadable``: why not).

    Raises:
        DatasetNotFound. DalError: (``check``) the dataset's storage cannot be listed.
    """
    history = cat.versions(name, limit=limit)
    if not check:
        return [readability(v.to_dict(), v, None) for v in history]
    from dal.ops import checks  # storage libraries: only for a check (a listing starts at once)

    found = checks.unreadable(cat.get_dataset(name), history, storage_options)
    return [readability(v.to_dict(), v, found) for v in history]


def readability(out: dict[str, Any], v: VersionInfo, checked: Mapping[int, str | None] | None) -> dict[str, Any]:
    """``out`` (a version's JSON) with ``readable`` and ``unreadable`` (why not) as far as known: from the
    catalog's mark, else from ``checked`` (``dal.ops.checks.unreadable``; None: not checked)."""
    why = v.unavailable or (checked or {}).get(v.number)
    out["readable"] = False if why else (None if checked is None or v.number not in checked else True)
    out["unreadable"] = why or None
    return out


def schema(cat: Catalog, name: str, version: VersionArg = None) -> dict[str, Any]:
    """The fields of one version, tensor fields with dtype, shape and codec (``dal schema --json``)."""
    v = cat.version(name, version)
    return {"dataset": name, "version": v.number, "fields": v.schema.to_list()}


def diff(cat: Catalog, name: str, old: VersionArg, new: VersionArg) -> dict[str, Any]:
    """Fields added, removed and changed between two versions, and their row counts (``dal diff --json``)."""
    d = cat.diff(name, old, new)
    a, b = cat.version(name, old), cat.version(name, new)
    out = d.to_dict()
    out["row_count"] = {"old": a.row_count, "new": b.row_count}
    return out


def partitions(cat: Catalog, name: str, version: VersionArg = None) -> dict[str, Any]:
    """The partitions present in one version with their sizes (``dal partitions --json``)."""
    v = cat.version(name, version)
    parts = cat.partitions(name, v.number)
    return {
        "dataset": name,
        "version": v.number,
        "partition_columns": list(v.partition_columns),
        "partitions": [p.to_dict() for p in parts],
    }


def tags(cat: Catalog, name: str) -> dict[str, Any]:
    """Every tag of a dataset and the version number it names."""
    return {"dataset": name, "tags": cat.tags(name)}


def to_json(obj: Any) -> str:
    """The CLI's JSON text (indented; datetimes and other values as ``str``)."""
    return json.dumps(obj, indent=2, default=str)
