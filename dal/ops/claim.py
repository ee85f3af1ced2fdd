"""``dal claim``: which catalog owns a dataset's location, and the explicit, logged transfer of that claim
(``dal.storage.claims`` holds the rule and the file)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dal import validate
from dal.api import CatalogLike, get_catalog
from dal.errors import DalError, translating
from dal.formats.registry import get_format
from dal.storage import claims
from dal.storage.location import Location
from dal.writes.recording import is_read_only


@dataclass(frozen=True)
class ClaimInfo:
    """Who owns a dataset's location: ``catalog_url`` (None: nobody yet), whether it is this catalog, whether a
    purge of it was stopped half-way, and the transfers it went through."""

    dataset: str
    location: str
    catalog_url: str | None
    catalog_id: str | None
    ours: bool
    read_only: bool
    purging: bool = False
    history: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "location": self.location,
            "claimed_by": self.catalog_url,
            "claimed_by_id": self.catalog_id,
            "this_catalog": self.ours,
            "read_only": self.read_only,
            "purging": self.purging,
            "history": [dict(h) for h in self.history],
        }


@translating("claiming {name}")
def claim(
    name: str,
    *,
    take_over: bool = False,
    reason: str = "",
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> ClaimInfo:
    """Which catalog owns ``name``'s location; with ``take_over``, move the claim to this catalog.

    Taking over is explicit and logged (a warning, and an entry in the claim's history naming both catalogs, the
    time and ``reason``): the other catalog may still read the table, and its writes, gc, optimize and purge
    are refused from then on. A read-only registration becomes a writable one.

    Args:
        name: The dataset's name in this catalog.
        take_over: Move the location's claim to this catalog.
        reason: Why (kept in the claim's history).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no such dataset in this catalog. DalError: a format dal never writes (plain Parquet:
            never claimed). FormatError: the claim file is not one dal can read.
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    if not isinstance(take_over, bool) or not isinstance(reason, str) or len(reason) > 500:
        raise DalError("take_over must be True or False and reason a text of at most 500 characters")
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    if not get_format(info.format).writable:
        raise DalError(f"{name} is a {info.format} dataset: dal never writes there, so no catalog claims it")
    loc = Location.of(info.location, storage_options)
    holder = claims.Holder(cat.catalog_id, cat.display, name)
    if take_over:
        cat.check_writable(name)
        found: claims.Claim | None = claims.take_over(loc, holder, reason or "dal claim --take-over")
        if is_read_only(info):
            cat.update_dataset(name, properties={claims.READ_ONLY: None})
            info = cat.get_dataset(name)
    else:
        found = claims.read(loc)
    if found is None:
        return ClaimInfo(name, info.location, None, None, False, is_read_only(info))
    return ClaimInfo(name, info.location, found.url, found.catalog, found.held_by(holder), is_read_only(info),
                     found.purging, found.history)  # fmt: skip


__all__ = ["ClaimInfo", "claim"]
