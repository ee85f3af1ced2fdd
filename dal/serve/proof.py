"""Storage credentials are vended only for a location dal can prove is the dataset's.

A grant says what a principal may read in the catalog; a vended credential says what it may read in storage. A
principal that may create datasets in its own namespace chooses their locations, so the location alone proves
nothing: pointed at another team's prefix (refused by the catalog: one location, one dataset) or at data no
dataset records (a raw prefix beside the datasets), a pin would hand out credentials for it. So before handing
credentials out the server looks, with those very credentials, at what is there:

- **reads** (a pin): the location's claim (``dal.storage.claims``) names this catalog, and no other record of
  this catalog is at, inside or around it. A location without a claim (a read-only registration, a table another
  catalog owns) gets no credentials: the reader uses its own, and storage decides.
- **writes** (a write begins): the same, or a location that holds nothing yet (a new dataset's).

A positive answer is kept for ``TTL_S`` seconds per (dataset, location), so a thousand ranks pinning at once cost
one look, not a thousand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from dal.storage import claims
from dal.storage.location import Location

TTL_S = 60.0
_proven: dict[tuple[str, str, str, bool], float] = {}
_lock = threading.Lock()


def _empty(loc: Location) -> bool:
    for _ in loc.list(""):
        return False
    return True


def proven(catalog_id: str, name: str, location: str, options: Mapping[str, str], *, empty_ok: bool = False) -> bool:
    """Whether ``location`` is proven ``name``'s in the catalog ``catalog_id`` (its claim names the catalog and
    is not a purge's; the caller has checked that no other record is there), or, ``empty_ok``, holds nothing.
    Looks with ``options`` (the credentials about to be vended); any failure to look is no proof."""
    key = (catalog_id, name, location, empty_ok)
    now = time.monotonic()
    with _lock:
        if _proven.get(key, 0.0) > now:
            return True
    loc = Location.of(location, dict(options))
    try:
        claim = claims.read(loc)
        ok = claim is not None and claim.catalog == catalog_id and not claim.purging
        if not ok and claim is None and empty_ok:
            ok = _empty(loc)
    except Exception:  # unreadable, refused, not a claim: no proof
        ok = False
    if ok:
        with _lock:
            if len(_proven) > 10_000:
                _proven.clear()
            _proven[key] = now + TTL_S
    return ok


UNPROVEN = "not vended: the location's claim does not name this catalog (or another record is there)"


def checked(
    catalog_id: str,
    name: str,
    location: str,
    credentials: dict[str, object] | None,
    others: list[str],
    *,
    empty_ok: bool = False,
) -> dict[str, object] | None:
    """``credentials`` when ``location`` is proven ``name``'s (``proven``; ``others``: the catalog's other records
    at, inside or around it, which disprove it); else None (nothing is handed out)."""
    if credentials is None:
        return None
    options = credentials.get("options")
    if others or not isinstance(options, dict):
        return None
    return credentials if proven(catalog_id, name, location, options, empty_ok=empty_ok) else None
