"""``dal changes``: the rows versions after ``since`` inserted and deleted, as the CLI prints them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dal.api import CatalogLike
from dal.catalog.types import VersionInfo, VersionRef
from dal.errors import FilterError
from dal.ops.lifecycle import HEAD_MAX_ROWS, display_rows


def changes(
    name: str,
    version: VersionRef = None,
    *,
    since: int | None,
    n: int = 10,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> tuple[VersionInfo, int, list[dict[str, Any]]]:
    """The version, how many change rows versions ``since`` (exclusive) up to ``version`` hold, and the first
    ``n`` of them (of ``where``'s matches) as dicts, with ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp`` (``Dataset.changes``).

    Raises:
        DatasetNotFound / VersionNotFound: no such dataset or version.
        FilterError: ``n`` out of range, or ``where`` is not a filter on the change read's columns.
        ChangesUnavailable: the history cannot say exactly what changed.
    """
    from dal import api

    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= HEAD_MAX_ROWS:
        raise FilterError(f"-n must be an integer in [0, {HEAD_MAX_ROWS}], not {n!r}")
    ds = api.open(name, version, storage_options=storage_options, catalog=catalog)
    scan = ds.changes(since=since)
    if where:
        scan = scan.filter(where)
    if columns:
        scan = scan.select(*columns)
    table = scan.to_arrow()
    return ds.version, table.num_rows, display_rows(table.slice(0, n), ds.schema)
