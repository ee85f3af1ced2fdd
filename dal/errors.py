"""dal's error hierarchy: the catalog's errors plus those of reading and writing data.

DalError
├── CatalogError ⊃ InvalidName, NotFound ⊃ {DatasetNotFound, VersionNotFound}, DatasetExists, TagExists,
│                  VersionConflict, CatalogUnavailable, CatalogOutOfDate
├── FormatError ⊃ SchemaMismatch, UnsupportedFeature
├── FilterError
└── MissingDependency
"""

from __future__ import annotations

from typing import Any

from catalog.errors import (
    CatalogError,
    CatalogOutOfDate,
    CatalogUnavailable,
    DalError,
    DatasetExists,
    DatasetNotFound,
    InvalidName,
    NotFound,
    TagExists,
    VersionConflict,
    VersionNotFound,
)


class FormatError(DalError):
    """Data on storage is missing, malformed, or not what the catalog says it is."""


class SchemaMismatch(FormatError, ValueError):
    """Data to write does not fit the dataset's schema; nothing was written."""


class UnsupportedFeature(FormatError):
    """The table uses a storage feature this read path cannot honour (it refuses instead of reading wrong rows)."""


class FilterError(DalError, ValueError):
    """A filter, projection or window refers to unknown columns, mismatched types, or is malformed."""


class MissingDependency(DalError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def require(module: str, extra: str) -> Any:
    """Import an optional module or raise ``MissingDependency`` with the pip command to run."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"{module} is needed for this; install it with: pip install 'dal[{extra}]'") from e


__all__ = [
    "CatalogError",
    "CatalogOutOfDate",
    "CatalogUnavailable",
    "DalError",
    "DatasetExists",
    "DatasetNotFound",
    "FilterError",
    "FormatError",
    "InvalidName",
    "MissingDependency",
    "NotFound",
    "SchemaMismatch",
    "TagExists",
    "UnsupportedFeature",
    "VersionConflict",
    "VersionNotFound",
    "require",
]
