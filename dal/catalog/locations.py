"""One location, one dataset: which datasets of a catalog share, hold or sit inside another's location.

A dataset's location belongs to one dataset of one catalog (the claim in the location says which catalog;
this says which dataset). Two records over one table would each write, garbage-collect and purge it as their
own, and a ``dal serve`` principal allowed to create datasets in its own namespace could point one at another
team's table (or a whole bucket) and be vended credentials for it. So ``create_dataset`` refuses a location
equal to, inside or around another dataset's, whoever asks; ``co_located`` names the records that overlap one
dataset (catalogs from before this rule may hold some): writes, gc, optimize and purge refuse while any does.

Locations are compared by a key, not as typed: the scheme's case and aliases (``s3a://`` is ``s3://``), ``file://``,
a query or fragment, doubled, ``.`` and ``..`` segments and a trailing ``/`` do not make two spellings of one place
two places.
"""

from __future__ import annotations

import posixpath
import urllib.parse

from sqlalchemy import select
from sqlalchemy.orm import Session

from dal.catalog.base import CatalogBase
from dal.catalog.errors import LocationTaken
from dal.catalog.models import DatasetRow

_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "azure": "az"}


def location_key(location: str) -> str:
    """``location`` spelled one way: ``scheme://authority/path`` for a URL (scheme lower case and unaliased, no
    query, fragment or trailing ``/``), a normalised absolute path for a local one."""
    text = location.strip()
    parts = urllib.parse.urlsplit(text)
    scheme = parts.scheme.lower()
    if len(scheme) <= 1 or scheme == "file":  # a path (a Windows drive letter is not a scheme)
        path = parts.path if scheme == "file" else text
        return posixpath.normpath("/" + path.lstrip("/")) if path.startswith("/") else posixpath.normpath(path)
    scheme = _ALIASES.get(scheme, scheme)
    path = posixpath.normpath("/" + parts.path.strip("/")) if parts.path.strip("/") else ""
    return f"{scheme}://{parts.netloc.lower()}{'' if path in ('', '/') else path}"


def overlap(a: str, b: str) -> bool:
    """Whether two locations are one place or one holds the other."""
    ka, kb = location_key(a), location_key(b)
    if ka == kb:
        return True
    inner, outer = (ka, kb) if len(ka) > len(kb) else (kb, ka)
    return inner.startswith(outer.rstrip("/") + "/")


class CatalogLocations(CatalogBase):
    """Which datasets overlap a location (part of ``Catalog``)."""

    @staticmethod
    def _overlapping(s: Session, location: str, *, besides: str | None = None) -> list[str]:
        """Names of the datasets (other than ``besides``) whose location overlaps ``location``, sorted."""
        rows = s.execute(select(DatasetRow.name, DatasetRow.location)).all()
        return sorted(str(n) for n, loc in rows if n != besides and overlap(str(loc), location))

    def co_located(self, name: str) -> list[str]:
        """The other datasets whose location is ``name``'s, inside it or around it: none, unless the catalog
        recorded them before one location was one dataset's.

        Args:
            name: the dataset.

        Returns:
            Their names, sorted (empty: the location is this dataset's alone).

        Raises:
            DatasetNotFound: no dataset ``name`` (close names suggested).
            InvalidName: ``name`` is not a dataset name.
        """
        with self._read() as s:
            row = self._dataset_row(s, name)
            return self._overlapping(s, str(row.location), besides=name)

    def overlapping(self, location: str, *, besides: str | None = None) -> list[str]:
        """The datasets (other than ``besides``) whose location is ``location``, inside it or around it: a new
        dataset there is refused (``create_dataset``), so a first write asks before it writes any data.

        Args:
            location: a path or object-store URL.
            besides: a dataset not to count (the one being written).

        Returns:
            Their names, sorted.
        """
        with self._read() as s:
            return self._overlapping(s, location, besides=besides)

    @classmethod
    def _refuse_overlap(cls, s: Session, name: str, location: str) -> None:
        """Refuse (``LocationTaken``) a location another dataset has, holds or sits in (in the creating
        transaction)."""
        taken = cls._overlapping(s, location, besides=name)
        if taken:
            raise LocationTaken(
                f"{location} overlaps the location of dataset {taken[0]!r} (the same place, inside it or around "
                f"it); one location belongs to one dataset: not creating {name!r}",
                other=taken[0],
            )
