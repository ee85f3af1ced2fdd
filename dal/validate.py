"""Checks of the public functions' arguments, so a wrong type is a ``DalError`` naming the argument instead of
a ``TypeError`` from deep inside pyarrow, SQLAlchemy or delta-rs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from catalog import Catalog
from catalog.types import validate_column, validate_text
from dal.errors import DalError


def _strings(value: object, what: str) -> None:
    if value is None:
        return
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise DalError(f"{what} must be a list of strings, not {type(value).__name__}")
    for v in value:
        if not isinstance(v, str):
            raise DalError(f"{what} must be a list of strings; it holds a {type(v).__name__}")


def _options(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise DalError(f"storage_options must be a mapping of strings to strings, not {type(value).__name__}")
    for k, v in value.items():
        validate_text(k, "a storage_options key", max_length=10_000)
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # the value itself is never shown: it may be a credential
            raise DalError(f"storage_options[{k!r}] is not valid Unicode text (an unpaired surrogate)") from None


def _catalog(value: object) -> None:
    if value is None or isinstance(value, Catalog):
        return
    validate_text(value, "catalog (a catalog URL or a Catalog)", max_length=10_000)
    if not value:
        raise DalError("catalog must be a catalog URL or a Catalog, not an empty string")


def _location(value: object, what: str) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise DalError(f"{what} must be a path or URL string, not {type(value).__name__}")
    if isinstance(value, str):
        validate_text(value, what, max_length=10_000)  # no NUL, no unpaired surrogate


_CHECKS: dict[str, Any] = {
    "storage_options": _options,
    "catalog": _catalog,
    "partition_by": lambda v: _strings(v, "partition_by"),
    "tags": lambda v: _strings(v, "tags"),
    "format": lambda v: validate_text(v, "format", max_length=100),
    "description": lambda v: validate_text(v, "description", optional=True),
    "time_column": validate_column,
    "path": lambda v: _location(v, "path"),
    "uri": lambda v: _location(v, "uri"),
}


def check(**arguments: object) -> None:
    """Check each named argument by its rule (see ``_CHECKS``).

    Raises:
        DalError (or its subclass InvalidName / CatalogError) naming the argument.
    """
    for key, value in arguments.items():
        _CHECKS[key](value)
