"""One error hierarchy for the catalog; ``dal.errors`` extends it for data I/O.

``DalError`` lives here (not in ``dal``) because the catalog package never imports ``dal``;
``dal.errors`` re-exports it so users only ever see one base class.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class DalError(Exception):
    """Base class of every error dal raises on purpose."""


class CatalogError(DalError):
    """Something about the catalog (metadata) went wrong."""


class InvalidName(CatalogError, ValueError):
    """A dataset name or tag does not follow the naming rules."""


def close_names(name: str, candidates: Iterable[str]) -> list[str]:
    """Up to three of ``candidates`` that look like ``name``, closest first (none for an empty name)."""
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6) if name else []


def suggest(name: str, candidates: Iterable[str], otherwise: str = "") -> str:
    """The end of a "not found" message: ``; did you mean 'a', 'b'?`` naming the candidates close to ``name``;
    without any, ``; <otherwise>`` (nothing when ``otherwise`` is empty). dal's column errors use it too."""
    close = close_names(name, candidates)
    if close:
        return "; did you mean " + ", ".join(repr(c) for c in close) + "?"
    return f"; {otherwise}" if otherwise else ""


class NotFound(CatalogError, LookupError):
    """A named thing is not in the catalog; the message suggests close names."""

    def __init__(self, what: str, key: str = "", candidates: Iterable[str] = (), hint: str = "") -> None:
        candidates = list(candidates)
        super().__init__(f"{what} not found" + suggest(key, candidates, hint))
        self.suggestions = tuple(close_names(key, candidates))


class DatasetNotFound(NotFound):
    """No dataset of that name."""


class VersionNotFound(NotFound):
    """No version of a dataset matches a number, tag or timestamp."""


class LabelNotFound(NotFound):
    """A dataset (or its column) has no such label."""


class DatasetExists(CatalogError):
    """A dataset of that name exists already (with different settings)."""


class LocationTaken(DatasetExists):
    """The location is another dataset's, or inside or around it (``other``: that dataset's name, when known)."""

    def __init__(self, message: str, other: str | None = None) -> None:
        super().__init__(message)
        self.other = other


class TagExists(CatalogError):
    """The tag already points at another version of the dataset."""


class VersionConflict(CatalogError):
    """A version for this storage version is recorded already, or the catalog moved underneath."""


class CatalogUnavailable(CatalogError):
    """The catalog database cannot be reached or opened."""


class CatalogReadOnly(CatalogError):
    """The catalog can be read but this role or file cannot write to it (privileges, read-only file)."""


class CommittedNotRecorded(CatalogError):
    """A write committed its data to storage but the catalog could not record it.

    The data is safe and complete in storage; ``dal sync NAME`` (or the next write) records it.
    Retrying the write would store the rows twice.
    """

    def __init__(self, message: str, *, dataset: str, location: str, storage_version: int) -> None:
        super().__init__(message)
        self.dataset = dataset
        self.location = location
        self.storage_version = storage_version


class CatalogOutOfDate(CatalogError):
    """The catalog database schema is older (or newer) than this dal needs."""
