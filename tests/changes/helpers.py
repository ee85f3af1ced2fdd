"""Shared by the change-read tests: rows as multisets, independent of dal's own diff, and reads by delta-rs."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import dal
from dal.read.changes import read_changes

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def canon(value: Any) -> Any:
    """A hashable, order-stable form of one value (NaN equal to NaN, dicts and lists as tuples)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(canon(v) for v in value)
    return value


def rows(table: pa.Table, columns: Sequence[str]) -> Counter[tuple[Any, ...]]:
    """The multiset of ``table``'s rows over ``columns`` (in that order)."""
    data = table.select(list(columns)).to_pylist()
    return Counter(tuple(canon(r[c]) for c in columns) for r in data)


def delta_rs_read(path: Path | str, version: int) -> pa.Table:
    """Every row of the Delta table at ``version``, as delta-rs's own engine reads it (deletion vectors and
    column mapping applied)."""
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path), version=version)
    return pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all())


def changes(name: str, catalog: str, since: int | None, until: int | None = None) -> pa.Table:
    """dal's change read of ``name`` between ``since`` (exclusive) and ``until`` (inclusive; None: newest)."""
    cat = dal.get_catalog(catalog)
    return read_changes(cat.get_dataset(name), cat.versions(name), since, until)
