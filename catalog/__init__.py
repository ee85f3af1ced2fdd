"""The dal catalog: datasets, versions, schemas, partitions and tags in SQLite or PostgreSQL.

This package never imports ``dal``; it hands out frozen values from ``catalog.types``.
"""

from catalog.engine import data_dir, default_url
from catalog.errors import (
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
from catalog.store import Catalog, VersionRef
from catalog.types import (
    DatasetInfo,
    Field,
    Partition,
    Schema,
    SchemaDiff,
    VersionDraft,
    VersionInfo,
    validate_name,
)

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
