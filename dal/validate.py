"""Checks of the public functions' arguments, so a wrong type is a ``DalError`` naming the argument instead of
a ``TypeError`` from deep inside pyarrow, SQLAlchemy or delta-rs."""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Mapping
from typing import Any

from dal.catalog.types import validate_column, validate_text
from dal.catalog.urls import MAX_URL_LENGTH
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
    check_header_values(value)  # control characters; credentials in plain ASCII (a Rust client panicked)


# credentials Rust's object_store puts into HTTP headers (unchecked: a control character made it panic, a
# pyo3 PanicException that escapes ``except Exception``), from storage_options or the environment
_HEADER_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_TOKEN",
                       "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_TOKEN",
                       "AZURE_STORAGE_CLIENT_SECRET", "GOOGLE_BEARER_TOKEN")  # fmt: skip


def check_header_values(options: Mapping[str, str]) -> None:
    """Refuse storage options a client would put into an HTTP header unchecked: a control character in any
    option, or anything but printable ASCII in a credential (options first, else the environment). The
    value is never shown: it may be a secret.

    Raises:
        DalError: naming the option and where it came from.
    """
    lowered = {k.lower(): (k, v, "storage_options") for k, v in options.items()}
    for name in _HEADER_CREDENTIALS:
        if name.lower() not in lowered and os.environ.get(name):
            lowered[name.lower()] = (name, os.environ[name], "the environment")
    credentials = {n.lower() for n in _HEADER_CREDENTIALS}
    for key, (name, value, source) in lowered.items():
        bad = next((i for i, c in enumerate(value) if ord(c) < 0x20 or ord(c) == 0x7F), None)
        if bad is None and key in credentials:
            bad = next((i for i, c in enumerate(value) if not c.isascii()), None)
        if bad is not None:
            what = "a control" if ord(value[bad]) < 0x20 or ord(value[bad]) == 0x7F else "a non-ASCII"
            raise DalError(
                f"storage option {name} (from {source}) has {what} character at position {bad}: credentials and "
                "options are plain text an HTTP header can carry; check how it was set (its value is not shown)"
            )


def _catalog(value: object) -> None:
    store = sys.modules.get("dal.catalog.store")  # not loaded: no Catalog exists (reads need no SQLAlchemy)
    if value is None or (store is not None and isinstance(value, store.Catalog)):
        return
    remote = sys.modules.get("dal.catalog.remote")  # a dal serve catalog's client (get_catalog gives one)
    if remote is not None and isinstance(value, remote.RemoteCatalog):
        return
    validate_text(value, "catalog (a catalog URL or a Catalog)", max_length=MAX_URL_LENGTH)
    if not value:
        raise DalError("catalog must be a catalog URL or a Catalog, not an empty string")


def _location(value: object, what: str) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise DalError(f"{what} must be a path or URL string, not {type(value).__name__}")
    if isinstance(value, str):
        validate_text(value, what, max_length=MAX_URL_LENGTH)  # no NUL, no unpaired surrogate


# the largest file size every writer takes: delta-rs's optimize refuses more (its writes take up to 2**64-1),
# Spark's coalesce counts in a Java long
MAX_FILE_SIZE = 2**63 - 1


def file_size(value: object, what: str = "target_file_size") -> int:
    """``value`` as a Python int of bytes in [1, ``MAX_FILE_SIZE``]: any integer (a NumPy one too), not a bool.

    Raises:
        DalError: naming ``what`` (a float, a string, a bool, zero, a negative or too large a size).
    """
    try:
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:  # a NumPy array has __index__ but refuses unless it is one integer
        raise DalError(f"{what} must be a positive number of bytes, not {type(value).__name__} {value!r:.80}") from None
    if not 1 <= number <= MAX_FILE_SIZE:
        shown = number if abs(number) < 10**30 else "a huge number"
        raise DalError(f"{what} must be a positive number of bytes up to 2**63-1, not {shown}")
    return number


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
