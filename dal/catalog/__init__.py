"""The dal catalog: datasets, versions, schemas, partitions and tags in SQLite or PostgreSQL.

This package never imports ``dal``; it hands out frozen values from ``dal.catalog.types``.

The names below load on first use (PEP 562): ``dal.catalog.types``, ``dal.catalog.errors`` and ``dal.catalog.urls`` are
plain Python, while ``Catalog`` brings SQLAlchemy, so a command that only needs the values (or the quick
read-only queries of ``dal.catalog.lite``) does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dal.catalog.errors import (
        CatalogError,
        CatalogOutOfDate,
        CatalogReadOnly,
        CatalogUnavailable,
        CommittedNotRecorded,
        DalError,
        DatasetExists,
        DatasetNotFound,
        InvalidName,
        NotFound,
        TagExists,
        VersionConflict,
        VersionNotFound,
    )
    from dal.catalog.home import data_dir, default_url
    from dal.catalog.store import Catalog
    from dal.catalog.types import (
        DatasetInfo,
        Field,
        Partition,
        Schema,
        SchemaDiff,
        VersionDraft,
        VersionInfo,
        VersionRef,
        validate_name,
    )

_ERRORS = (
    "CatalogError",
    "CatalogOutOfDate",
    "CatalogReadOnly",
    "CatalogUnavailable",
    "CommittedNotRecorded",
    "DalError",
    "DatasetExists",
    "DatasetNotFound",
    "InvalidName",
    "NotFound",
    "TagExists",
    "VersionConflict",
    "VersionNotFound",
)
_TYPES = ("DatasetInfo", "Field", "Partition", "Schema", "SchemaDiff", "VersionDraft", "VersionInfo", "validate_name")
# public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    **dict.fromkeys(_ERRORS, "dal.catalog.errors"),
    **dict.fromkeys(_TYPES, "dal.catalog.types"),
    "Catalog": "dal.catalog.store",
    "VersionRef": "dal.catalog.types",
    "data_dir": "dal.catalog.home",
    "default_url": "dal.catalog.home",
}

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogOutOfDate",
    "CatalogReadOnly",
    "CatalogUnavailable",
    "CommittedNotRecorded",
    "DalError",
    "DatasetExists",
    "DatasetInfo",
    "DatasetNotFound",
    "Field",
    "InvalidName",
    "NotFound",
    "Partition",
    "Schema",
    "SchemaDiff",
    "TagExists",
    "VersionConflict",
    "VersionDraft",
    "VersionInfo",
    "VersionNotFound",
    "VersionRef",
    "data_dir",
    "default_url",
    "validate_name",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use and keep it as a module attribute."""
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'dal.catalog' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
